// The `endpoint` kind: POST {task, trajectory} to the URL in `ref` and read a reward back.
// One undici Agent for every user-named endpoint (keep-alive, a cap on connections per origin),
// one overall deadline per verification covering retries, headers and a dripping body, and the
// egress guard in front of every socket.
import { Agent } from 'undici'
import { VerificationError, type VerifierIdentity } from '../../errors.js'
import { snippet } from '../../snippet.js'
import type { KindHandler, VerificationContext } from '../../registry.js'
import { toVerifierResult } from '../../result.js'
import { Deadline, type StopSignal } from '../../deadline.js'
import { exchange } from '../../http-exchange.js'
import { CONNECT_FAILURES, networkErrorCode } from '../../network-error.js'
import { retryAfterMs } from '../../retry-after.js'
import { USER_AGENT } from '../../version.js'
import { parseAnswer } from './answer.js'
import { EGRESS_DENIED, EgressGuard, type LookupFunction } from './egress.js'

export const DEFAULT_TIMEOUT_S = 60
/** The most a scorer's Retry-After may make us wait between attempts. */
const MAX_RETRY_AFTER_MS = 10_000
const BACKOFF_BASE_MS = 100

export interface EndpointKindOptions {
  allow: string[]
  maxResponseBytes: number
  connectionsPerOrigin: number
  retries: number
  maxTimeoutS: number
  /** DNS lookup used before the guard's check; tests inject one to prove rebinding is refused. */
  lookup?: LookupFunction
  onRetry?: (reason: string) => void
}

interface Attempt { error: VerificationError, retry: boolean, waitMs?: number }

/** One verification's request, the same for each of its attempts. */
interface ScorerCall {
  verifier: VerifierIdentity
  url: URL
  headers: Record<string, string>
  payload: Buffer
}

export function createEndpointKind (options: EndpointKindOptions): KindHandler {
  const guard = new EgressGuard(options.allow)
  const maxTimeoutMs = options.maxTimeoutS * 1000
  const agent = new Agent({
    connections: options.connectionsPerOrigin,
    keepAliveTimeout: 10_000,
    // The per-verification deadline is the real one; these only must not cut it short.
    headersTimeout: maxTimeoutMs,
    bodyTimeout: maxTimeoutMs,
    maxResponseSize: options.maxResponseBytes,
    connect: { lookup: guard.lookup(options.lookup) }
  })

  async function attempt (context: VerificationContext, call: ScorerCall, signal: StopSignal, number: number): Promise<Attempt | ReturnType<typeof toVerifierResult>> {
    const { verifier, url } = call
    let answer
    try {
      answer = await exchange(agent, {
        origin: url.origin,
        path: url.pathname + url.search,
        signal,
        headers: call.headers,
        body: call.payload,
        maxBytes: options.maxResponseBytes
      })
    } catch (error) {
      return classify(error, call, signal, context.timeoutMs, options.maxResponseBytes)
    }
    const { status, headers } = answer
    if (status >= 300 && status < 400) {
      const location = typeof headers.location === 'string' ? ` to ${headers.location}` : ''
      return { retry: false, error: new VerificationError('ARB_ENDPOINT_REDIRECT', verifier, `endpoint answered ${status}, a redirect${location}; redirects are not followed, use the final URL as ref`, { details: { status } }) }
    }
    if (status < 200 || status >= 300) {
      const peek = answer.body.toString('utf8') // exchange() keeps only the first 4 KiB of an error page
      const retryable = status === 429 || status >= 500
      const error = new VerificationError('ARB_ENDPOINT_HTTP_STATUS', verifier, `endpoint answered ${status}: ${snippet(peek) || '(empty body)'}`, { retryable, details: { status } })
      const waitMs = retryAfterMs(headers['retry-after'])
      const asked = (status === 429 || status === 503) && waitMs !== undefined && waitMs <= MAX_RETRY_AFTER_MS
      return { error, retry: asked, waitMs }
    }
    const verdict = parseAnswer(answer.body.toString('utf8'), verifier, status)
    return toVerifierResult(verdict, { kind: 'endpoint', ref: verifier.ref, status, attempts: number }, context.manifest.verifier.pass_threshold)
  }

  return {
    kind: 'endpoint',
    defaultTimeoutS: DEFAULT_TIMEOUT_S,

    async verify (context) {
      const ref = context.manifest.verifier.ref
      const verifier: VerifierIdentity = { kind: 'endpoint', ref }
      const url = new URL(ref)
      const problem = guard.urlProblem(url)
      if (problem !== undefined) throw new VerificationError('ARB_ENDPOINT_FORBIDDEN', verifier, `egress guard: ${problem}`)

      const call: ScorerCall = {
        verifier,
        url,
        headers: { 'content-type': 'application/json', accept: 'application/json', 'user-agent': USER_AGENT, 'x-request-id': context.requestId },
        payload: Buffer.from(JSON.stringify({ task: context.task, trajectory: context.trajectory }))
      }
      // One deadline for the whole exchange: every attempt, headers, a dripping body, retries.
      const deadline = new Deadline(context.timeoutMs, 'endpoint')
      try {
        for (let number = 1; ; number++) {
          const outcome = await attempt(context, call, deadline, number)
          if (!('error' in outcome)) return outcome
          if (!outcome.retry || number > options.retries) throw outcome.error
          const waitMs = outcome.waitMs ?? jitter(BACKOFF_BASE_MS * 2 ** (number - 1))
          if (!deadline.fits(waitMs)) throw outcome.error
          options.onRetry?.(outcome.error.code)
          context.log.debug({ verifier, attempt: number, code: outcome.error.code, waitMs }, 'retrying endpoint')
          await deadline.sleep(waitMs).catch(() => { throw timeoutError(verifier, context.timeoutMs) })
        }
      } finally {
        deadline.clear()
      }
    },

    describe () {
      return {
        default_timeout_s: DEFAULT_TIMEOUT_S,
        max_response_bytes: options.maxResponseBytes,
        retries: options.retries,
        allowed: guard.describe()
      }
    },

    async close () {
      await agent.close()
    }
  }
}

function timeoutError (verifier: VerifierIdentity, timeoutMs: number): VerificationError {
  return new VerificationError('ARB_ENDPOINT_TIMEOUT', verifier, `endpoint did not answer within ${timeoutMs / 1000} s (set verifier.timeout_s to change the deadline)`)
}

/** Maps a socket-level failure to its code; only connect failures may be retried. */
function classify (error: unknown, { verifier, url }: ScorerCall, signal: StopSignal, timeoutMs: number, maxBytes: number): Attempt {
  if (signal.aborted) return { retry: false, error: timeoutError(verifier, timeoutMs) }
  const code = networkErrorCode(error)
  const detail = (error as Error)?.message ?? String(error)
  const make = (name: ConstructorParameters<typeof VerificationError>[0], message: string): VerificationError =>
    new VerificationError(name, verifier, message, { cause: error })
  if (code === EGRESS_DENIED) return { retry: false, error: make('ARB_ENDPOINT_FORBIDDEN', `egress guard: ${detail}`) }
  if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') return { retry: false, error: make('ARB_ENDPOINT_RESPONSE_TOO_LARGE', `endpoint answer is over the ${maxBytes} byte cap (ARBITER_ENDPOINT_MAX_BYTES)`) }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return { retry: code === 'EAI_AGAIN', error: make('ARB_ENDPOINT_DNS_FAILED', `endpoint host ${url.hostname} did not resolve (${code})`) }
  }
  if (code === 'ECONNREFUSED') return { retry: true, error: make('ARB_ENDPOINT_CONNECTION_REFUSED', `connection refused by ${url.host}: is the scorer running?`) }
  if (code !== undefined && CONNECT_FAILURES.has(code)) return { retry: true, error: make('ARB_ENDPOINT_CONNECTION_REFUSED', `could not connect to ${url.host} (${code})`) }
  return { retry: false, error: make('ARB_ENDPOINT_CONNECTION_RESET', `connection to ${url.host} failed before a full answer (${code ?? 'error'}: ${detail})`) }
}

function jitter (ms: number): number {
  return Math.round(ms * (0.5 + Math.random()))
}
