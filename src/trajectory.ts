// The one flattening function: what the model produced, as text, for the judge and for logs.
// Plugins and endpoints get the trajectory as submitted; only the rubric judge reads this.
//
// A string stays a string; a message or content part contributes its `content` (else `text`);
// a list is joined with newlines; content that is itself a list of parts is flattened the same
// way. Anything else (numbers, booleans, null, objects with neither field) is rendered as JSON
// rather than dropped, so nothing the model produced silently disappears from the judge's view.

export function flattenTrajectory (value: unknown): string {
  if (typeof value === 'string') return value
  if (Array.isArray(value)) return value.map(flattenTrajectory).join('\n')
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>
    if (record.content !== undefined && record.content !== null) return flattenTrajectory(record.content)
    if (record.text !== undefined && record.text !== null) return flattenTrajectory(record.text)
  }
  return JSON.stringify(value) ?? String(value)
}
