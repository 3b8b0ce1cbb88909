// The code that says why a network call failed, and which failures can be retried, for the
// endpoint kind and the judge client. undici wraps socket failures (UND_ERR_SOCKET,
// UND_ERR_CONNECT) around the system error that names the cause (ECONNRESET, ECONNREFUSED, …):
// the most specific code wins.

const WRAPPERS = new Set(['UND_ERR_SOCKET', 'UND_ERR_CONNECT'])

/** The request never reached the server: retrying it cannot do anything twice. */
export const CONNECT_FAILURES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'])

/** The connection broke once the request may have been sent: retried only where that is harmless. */
export const DROPPED_CONNECTIONS: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'])

export function networkErrorCode (error: unknown): string | undefined {
  let current = error as { code?: unknown, cause?: unknown } | null | undefined
  for (let depth = 0; current !== null && current !== undefined && typeof current === 'object' && depth < 5; depth++) {
    const code = current.code
    const cause = current.cause as typeof current
    if (typeof code === 'string' && (!WRAPPERS.has(code) || cause === null || cause === undefined)) return code
    current = cause
  }
  return undefined
}
