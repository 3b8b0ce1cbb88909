// The one Retry-After parser, for the endpoint kind, the judge client and the rollout client.
// The header is delta-seconds or an HTTP date; a date in the past means now.

/** Milliseconds to wait, or undefined when the header is absent or unreadable. */
export function retryAfterMs (header: string | string[] | null | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined || value === null || value.trim() === '') return undefined
  if (/^\s*[0-9]+(\.[0-9]+)?\s*$/.test(value)) return Math.round(Number(value) * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}
