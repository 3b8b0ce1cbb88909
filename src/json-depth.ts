// How deeply a parsed JSON value nests, measured without recursion: a request nested deeper
// than the limit is a 400 before any code that recurses (serialization, flattening) sees it.

/** True when `value` nests deeper than `limit` arrays/objects. Runs on every request: no allocation per node. */
export function exceedsDepth (value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false
  const pending: object[] = [value]
  const depths: number[] = [1]
  while (pending.length > 0) {
    const current = pending.pop() as object
    const depth = depths.pop() as number
    if (depth > limit) return true
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        const child: unknown = current[i]
        if (child !== null && typeof child === 'object') {
          pending.push(child)
          depths.push(depth + 1)
        }
      }
      continue
    }
    // A parsed JSON object has only its own enumerable keys: for...in visits exactly those.
    for (const key in current) {
      const child = (current as Record<string, unknown>)[key]
      if (child !== null && typeof child === 'object') {
        pending.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return false
}
