// How deeply a parsed JSON value nests, measured without recursion: a request nested deeper
// than the limit is a 400 before any code that recurses (serialization, flattening) sees it.

/** True when `value` nests deeper than `limit` arrays/objects. */
export function exceedsDepth (value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number]
    if (current === null || typeof current !== 'object') continue
    if (depth + 1 > limit) return true
    const children = Array.isArray(current) ? current : Object.values(current)
    for (const child of children) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
    }
  }
  return false
}
