// A small typed client for rollout workers (RL training loops, eval harnesses).
//
//   const arbiter = new ArbiterClient({ baseUrl: 'http://arbiter:80', token })
//   const { results } = await arbiter.verifyBatch({ manifest, items })
//
// Retry policy, the same in the Python client (clients/python/arbiter_client.py):
// - an error body marked `retryable: true` is retried; `retryable: false` never is;
// - a 503 whose body is not an Arbiter error body (a proxy's) is retried when it has Retry-After;
// - a connection error before any response (refused, reset, DNS) is retried;
// - anything else (400, 401, a 502 marked retryable: false, a malformed 200) is thrown at once.
// Waits are jittered exponential backoff, or the server's Retry-After (capped) plus a little jitter;
// attempts are bounded and every attempt and wait fits inside one per-call deadline.
//
// Only the Static types of schemas/ are imported, so this module pulls in no server code and no
// dependency: it runs on Node >= 20 with the global fetch (or a fetch you pass in).
import { setTimeout as sleep } from 'node:timers/promises'
import type { Manifest, Task, VerifyRequest } from '../schemas/verify.js'
import type { VerifyResponse } from '../schemas/result.js'
import type { ErrorBody } from '../schemas/error.js'
import { networkErrorCode } from './network-error.js'
import { retryAfterMs } from './retry-after.js'
import { snippet } from './snippet.js'

export type { ErrorBody, Manifest, Task, VerifyRequest, VerifyResponse }

/** One item of a batch that shares the envelope's manifest. */
export interface BatchItem {
  task: Task
  trajectory: unknown
}

/** POST /v1/verify/batch: items with their own manifests, or one shared manifest. */
export type BatchRequest =
  | { items: VerifyRequest[] }
  | { manifest: Manifest, items: BatchItem[] }

/** Each batch entry is its own 200-shaped result or its own error body, in request order. */
export type BatchEntry = VerifyResponse | ErrorBody

export interface BatchResponse {
  /** In item order: a /v1/verify 200 body, or an error body (test with isErrorBody). */
  results: BatchEntry[]
  /** Entries with a reward. */
  ok: number
  /** Entries that are error bodies. */
  failed: number
}

/** Codes the client itself gives when there is no Arbiter error body to report. */
export type ClientErrorCode =
  | 'CLIENT_TIMEOUT' // the per-call deadline passed
  | 'CLIENT_ABORTED' // the caller's signal aborted the call
  | 'CLIENT_CONNECTION_FAILED' // no response: refused, reset, DNS failure
  | 'CLIENT_HTTP_STATUS' // a non-2xx answer without an Arbiter error body (a proxy's page)
  | 'CLIENT_BAD_RESPONSE' // a 2xx answer that is not the documented shape

export interface RetryEvent {
  /** The attempt that just failed, from 1. */
  attempt: number
  /** How long the client waits before the next attempt. */
  delayMs: number
  error: ArbiterClientError
  /** For batch item retries: the indices (into the original items) sent again. */
  items?: number[]
}

export interface ArbiterClientOptions {
  /** e.g. http://127.0.0.1:8080 or http://arbiter.rl.svc.cluster.local */
  baseUrl: string
  /** A bearer token from ARBITER_API_TOKENS, when the server requires one. */
  token?: string
  /** Deadline for a whole call, retries and waits included (default 300 000 ms). */
  timeoutMs?: number
  /** Attempts per call at most, the first included (default 4). */
  maxAttempts?: number
  /** Backoff: attempt n waits a random time in [0, min(maxDelayMs, baseDelayMs * 2^(n-1))). */
  baseDelayMs?: number
  maxDelayMs?: number
  /** Longest Retry-After honoured; a longer one is cut to this (default 30 000 ms). */
  maxRetryAfterMs?: number
  /** Batch entries marked retryable are sent again (only those), within the same bounds (default true). */
  retryItems?: boolean
  /** Extra headers on every request. */
  headers?: Record<string, string>
  /** A fetch implementation, e.g. undici's with a custom dispatcher (default: global fetch). */
  fetch?: typeof globalThis.fetch
  /** Called before each wait, for logs or metrics. */
  onRetry?: (event: RetryEvent) => void
}

export interface CallOptions {
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number
  signal?: AbortSignal
  /** Sent as x-request-id (kept across retries) so client and server logs line up. */
  requestId?: string
}

interface ClientErrorInit {
  code: string
  message: string
  status?: number
  retryable: boolean
  body?: ErrorBody
  retryAfterMs?: number
  cause?: unknown
}

/**
 * Every failure of a call. `code` is the server's stable ARB_ code when it answered with an error
 * body (`body` holds it whole), else one of ClientErrorCode.
 */
export class ArbiterClientError extends Error {
  readonly code: string
  readonly status?: number
  /** Whether the same request may succeed later (the server's word when it gave one). */
  readonly retryable: boolean
  /** The error body as the server sent it, when it sent one. */
  readonly body?: ErrorBody
  readonly verifier?: { kind: string, ref: string }
  readonly requestId?: string
  /** Retry-After from the answer, in ms (before any cap). */
  readonly retryAfterMs?: number
  /** Attempts made before this error was thrown. */
  attempts = 1

  constructor (init: ClientErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = 'ArbiterClientError'
    this.code = init.code
    this.retryable = init.retryable
    if (init.status !== undefined) this.status = init.status
    if (init.body !== undefined) {
      this.body = init.body
      if (init.body.verifier !== undefined) this.verifier = init.body.verifier
      if (typeof init.body.requestId === 'string') this.requestId = init.body.requestId
    }
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs
  }
}

/** True for a batch entry (or any value) that is an Arbiter error body rather than a result. */
export function isErrorBody (value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false
  const body = value as Record<string, unknown>
  return typeof body.statusCode === 'number' && typeof body.code === 'string' && typeof body.retryable === 'boolean'
}

function isResult (value: unknown): value is VerifyResponse {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const reward = (value as Record<string, unknown>).reward
  return typeof reward === 'number' && Number.isFinite(reward)
}

/** Retry-After is delta-seconds or an HTTP date; returns ms, or undefined when absent or unreadable. */
export const parseRetryAfter = retryAfterMs

/** The state one call shares across its attempts: deadline and signal. */
interface CallState {
  deadline: number
  signal: AbortSignal
  timeout: AbortSignal
  caller?: AbortSignal
  requestId?: string
}

const DEFAULTS = {
  timeoutMs: 300_000,
  maxAttempts: 4,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 30_000
}

export class ArbiterClient {
  readonly #baseUrl: string
  readonly #headers: Record<string, string>
  readonly #timeoutMs: number
  readonly #maxAttempts: number
  readonly #baseDelayMs: number
  readonly #maxDelayMs: number
  readonly #maxRetryAfterMs: number
  readonly #retryItems: boolean
  readonly #fetch: typeof globalThis.fetch
  readonly #onRetry?: (event: RetryEvent) => void

  constructor (options: ArbiterClientOptions) {
    if (!URL.canParse(options.baseUrl) || !/^https?:$/.test(new URL(options.baseUrl).protocol)) {
      throw new TypeError(`baseUrl must be an http(s) URL such as http://127.0.0.1:8080, got "${options.baseUrl}"`)
    }
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.#headers = {
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': 'arbiter-client-ts/1',
      ...options.headers
    }
    if (options.token !== undefined && options.token !== '') this.#headers.authorization = `Bearer ${options.token}`
    this.#timeoutMs = positive('timeoutMs', options.timeoutMs ?? DEFAULTS.timeoutMs)
    this.#maxAttempts = Math.floor(positive('maxAttempts', options.maxAttempts ?? DEFAULTS.maxAttempts))
    this.#baseDelayMs = nonNegative('baseDelayMs', options.baseDelayMs ?? DEFAULTS.baseDelayMs)
    this.#maxDelayMs = nonNegative('maxDelayMs', options.maxDelayMs ?? DEFAULTS.maxDelayMs)
    this.#maxRetryAfterMs = nonNegative('maxRetryAfterMs', options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs)
    this.#retryItems = options.retryItems ?? true
    this.#fetch = options.fetch ?? globalThis.fetch
    if (options.onRetry !== undefined) this.#onRetry = options.onRetry
  }

  /** POST /v1/verify: a result with a finite reward, or an ArbiterClientError. */
  async verify (request: VerifyRequest, options: CallOptions = {}): Promise<VerifyResponse> {
    const state = this.#start(options)
    const body = await this.#send('/v1/verify', request, state)
    if (!isResult(body)) throw badResponse('a 200 from /v1/verify without a finite numeric reward')
    return body
  }

  /**
   * POST /v1/verify/batch. Resolves with every entry in request order, each a result or an error
   * body (use isErrorBody). Entries marked retryable are sent again, alone, while attempts and the
   * deadline allow; what is still failing after that is returned as its error body, not thrown.
   * Throws only when the batch call itself fails (400, 401, 503 after retries, no connection).
   */
  async verifyBatch (request: BatchRequest, options: CallOptions = {}): Promise<BatchResponse> {
    const state = this.#start(options)
    const all = request.items as Array<VerifyRequest | BatchItem>
    const results: BatchEntry[] = new Array(all.length)
    let pending = all.map((_, index) => index)
    let last: Record<string, unknown> | undefined
    for (let round = 1; ; round++) {
      const items = pending.map((index) => all[index])
      let answer: unknown
      try {
        answer = await this.#send('/v1/verify/batch', { ...request, items }, state)
      } catch (error) {
        // A resend that fails as a whole (deadline, 503s) leaves the earlier answers standing:
        // every entry already holds a result or its own error body.
        if (round === 1 || (error as ArbiterClientError).code === 'CLIENT_ABORTED') throw error
        break
      }
      const entries = (answer as { results?: unknown } | null)?.results
      if (!Array.isArray(entries) || entries.length !== items.length) {
        throw badResponse(`a 200 from /v1/verify/batch without one result per item (sent ${items.length})`)
      }
      entries.forEach((entry: unknown, position) => {
        if (!isErrorBody(entry) && !isResult(entry)) throw badResponse(`batch entry ${pending[position]} is neither a result nor an error body`)
        results[pending[position]] = entry
      })
      last = answer as Record<string, unknown>
      const again = pending.filter((index) => { const entry = results[index]; return isErrorBody(entry) && entry.retryable })
      if (!this.#retryItems || again.length === 0 || round >= this.#maxAttempts) break
      const delayMs = this.#backoff(round)
      if (Date.now() + delayMs >= state.deadline) break
      const first = results[again[0]] as ErrorBody
      this.#onRetry?.({ attempt: round, delayMs, error: fromBody(first.statusCode, first, undefined), items: again })
      try {
        await this.#wait(delayMs, state, undefined)
      } catch (error) {
        if ((error as ArbiterClientError).code === 'CLIENT_ABORTED') throw error
        break // the deadline, at the very edge of the wait: keep the answers already here
      }
      pending = again
    }
    // Counted again over the merged entries: the last round's counts cover only its resends.
    const failed = results.filter((entry) => isErrorBody(entry)).length
    return { ...last, results, ok: results.length - failed, failed }
  }

  #start (options: CallOptions): CallState {
    const timeoutMs = positive('timeoutMs', options.timeoutMs ?? this.#timeoutMs)
    const timeout = AbortSignal.timeout(timeoutMs)
    const state: CallState = {
      deadline: Date.now() + timeoutMs,
      timeout,
      signal: options.signal === undefined ? timeout : AbortSignal.any([options.signal, timeout])
    }
    if (options.signal !== undefined) state.caller = options.signal
    if (options.requestId !== undefined) state.requestId = options.requestId
    return state
  }

  /** One call with its retries: resolves with the parsed 2xx body, throws the last error. */
  async #send (path: string, payload: unknown, state: CallState): Promise<unknown> {
    const body = JSON.stringify(payload)
    for (let attempt = 1; ; attempt++) {
      let error: ArbiterClientError
      try {
        return await this.#attempt(path, body, state)
      } catch (caught) {
        error = caught instanceof ArbiterClientError ? caught : interrupted(caught, state)
      }
      error.attempts = attempt
      if (!error.retryable || attempt >= this.#maxAttempts || isInterruption(error)) throw error
      const delayMs = this.#delay(attempt, error.retryAfterMs)
      // Waiting past the deadline only to time out would hide the real error.
      if (Date.now() + delayMs >= state.deadline) throw error
      this.#onRetry?.({ attempt, delayMs, error })
      await this.#wait(delayMs, state, error)
    }
  }

  async #attempt (path: string, body: string, state: CallState): Promise<unknown> {
    const headers = state.requestId === undefined ? this.#headers : { ...this.#headers, 'x-request-id': state.requestId }
    let response: Response
    try {
      response = await this.#fetch(`${this.#baseUrl}${path}`, { method: 'POST', headers, body, signal: state.signal, redirect: 'manual' })
    } catch (cause) {
      if (state.signal.aborted) throw interrupted(cause, state)
      // No response at all: nothing reached a verifier that answered, so this may be tried again.
      throw new ArbiterClientError({ code: 'CLIENT_CONNECTION_FAILED', message: `no response from ${this.#baseUrl}: ${describe(cause)}`, retryable: true, cause })
    }
    let text: string
    try {
      text = await response.text()
    } catch (cause) {
      if (state.signal.aborted) throw interrupted(cause, state)
      // The server had started answering: it may have run the verification, so this is not resent.
      throw new ArbiterClientError({ code: 'CLIENT_CONNECTION_FAILED', message: `the answer from ${this.#baseUrl} broke off: ${describe(cause)}`, status: response.status, retryable: false, cause })
    }
    let parsed: unknown
    let parseError: unknown
    try {
      parsed = JSON.parse(text)
    } catch (cause) {
      parseError = cause
    }
    if (response.status >= 200 && response.status < 300) {
      if (parseError !== undefined) throw badResponse(`a ${response.status} answer that is not JSON: ${snippet(text)}`, response.status, parseError)
      return parsed
    }
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'))
    if (isErrorBody(parsed)) throw fromBody(response.status, parsed, retryAfterMs)
    // Not Arbiter speaking (a proxy, a load balancer): only a 503 that names a time is retried.
    throw new ArbiterClientError({
      code: 'CLIENT_HTTP_STATUS',
      message: `HTTP ${response.status} without an Arbiter error body: ${snippet(text)}`,
      status: response.status,
      retryable: response.status === 503 && retryAfterMs !== undefined,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs })
    })
  }

  #delay (attempt: number, retryAfterMs: number | undefined): number {
    if (retryAfterMs === undefined) return this.#backoff(attempt)
    const wait = Math.min(retryAfterMs, this.#maxRetryAfterMs)
    // A little jitter on top, so a fleet of workers told "1 s" does not return in one instant.
    return Math.round(wait + Math.random() * Math.min(1000, wait * 0.1))
  }

  #backoff (attempt: number): number {
    return Math.round(Math.random() * Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (attempt - 1)))
  }

  async #wait (delayMs: number, state: CallState, last: ArbiterClientError | undefined): Promise<void> {
    try {
      await sleep(delayMs, undefined, { signal: state.signal })
    } catch (cause) {
      const error = interrupted(cause, state)
      if (last !== undefined) error.attempts = last.attempts
      throw error
    }
  }
}

/** Shorthand for one-off calls; a long-lived worker should keep one ArbiterClient. */
export function createClient (options: ArbiterClientOptions): ArbiterClient {
  return new ArbiterClient(options)
}

function fromBody (status: number, body: ErrorBody, retryAfterMs: number | undefined): ArbiterClientError {
  const where = body.verifier === undefined ? '' : ` (${body.verifier.kind} ${body.verifier.ref})`
  return new ArbiterClientError({
    code: body.code,
    message: `${body.code}${where}: ${body.message}`,
    status,
    retryable: body.retryable === true,
    body,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs })
  })
}

function interrupted (cause: unknown, state: CallState): ArbiterClientError {
  if (state.caller?.aborted === true) {
    return new ArbiterClientError({ code: 'CLIENT_ABORTED', message: 'the call was aborted by its signal', retryable: false, cause })
  }
  if (state.timeout.aborted || state.signal.aborted) {
    return new ArbiterClientError({ code: 'CLIENT_TIMEOUT', message: 'the call did not finish within its deadline', retryable: true, cause })
  }
  // c8 ignore next 2 -- fetch and text() only reject with abort or network errors, handled above
  return new ArbiterClientError({ code: 'CLIENT_CONNECTION_FAILED', message: describe(cause), retryable: false, cause })
}

function isInterruption (error: ArbiterClientError): boolean {
  return error.code === 'CLIENT_TIMEOUT' || error.code === 'CLIENT_ABORTED'
}

function badResponse (message: string, status?: number, cause?: unknown): ArbiterClientError {
  return new ArbiterClientError({ code: 'CLIENT_BAD_RESPONSE', message, retryable: false, ...(status === undefined ? {} : { status }), cause })
}

function describe (error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const detail = networkErrorCode(error) ?? (error.cause as { message?: unknown } | undefined)?.message
  return detail === undefined ? error.message : `${error.message} (${String(detail)})`
}

function positive (name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new TypeError(`${name} must be a positive number, got ${value}`)
  return value
}

function nonNegative (name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be zero or more, got ${value}`)
  return value
}
