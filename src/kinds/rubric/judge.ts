// The client for an OpenAI-compatible chat-completions judge, through its own undici Pool bound
// to the judge's origin: the API key is sent on this pool's requests only, so it can never leave
// for another host, and redirects are not followed. Every call runs inside the caller's
// deadline signal (queue wait, retries and Retry-After sleeps included); at most `concurrency`
// requests are in flight; 429, 5xx and connection failures are retried at most `retries` times.
import type { Deadline, StopSignal } from '../../deadline.js'
import sjson from 'secure-json-parse'
import { Pool } from 'undici'
import { exchange } from '../../http-exchange.js'
import { ArbiterError } from '../../errors.js'
import { snippet } from '../../snippet.js'
import { flattenTrajectory } from '../../trajectory.js'
import type { Log } from '../../registry.js'
import { Slots } from '../../slots.js'
import { CONNECT_FAILURES, DROPPED_CONNECTIONS, networkErrorCode } from '../../network-error.js'
import { retryAfterMs } from '../../retry-after.js'

export interface JudgeUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
}

export interface Completion {
  content: string
  refusal: string | undefined
  finishReason: string | undefined
  /** The model the server says answered. */
  model: string | undefined
  usage: JudgeUsage
}

export interface JudgeClientOptions {
  baseUrl: string
  apiKey: string | undefined
  concurrency: number
  log: Log
  retries?: number
  /** First backoff when the judge gives no Retry-After; doubles per retry. */
  retryBaseMs?: number
  maxResponseBytes?: number
}

/** A chat completion changes nothing on the judge's side: a dropped connection is retried too. */
function retryable (code: string | undefined): code is string {
  return code !== undefined && (CONNECT_FAILURES.has(code) || DROPPED_CONNECTIONS.has(code) || code === 'ENOTFOUND')
}

export class JudgeClient {
  readonly origin: string
  readonly #path: string
  readonly #pool: Pool
  readonly #slots: Slots
  readonly #headers: Record<string, string>
  readonly #apiKey: string | undefined
  readonly #retries: number
  readonly #retryBaseMs: number
  readonly #maxResponseBytes: number
  readonly #log: Log

  constructor (options: JudgeClientOptions) {
    const url = new URL(options.baseUrl)
    this.origin = url.origin
    this.#path = `${url.pathname.replace(/\/+$/, '')}/chat/completions${url.search}`
    this.#maxResponseBytes = options.maxResponseBytes ?? 8 * 1024 * 1024
    // undici's own headers/body timers are off: the per-verification deadline signal (manifest
    // timeout_s or ARBITER_JUDGE_TIMEOUT_S, capped by ARBITER_MAX_TIMEOUT_S) bounds every call,
    // dripping bodies included, and a fixed pool timer would cut a longer manifest deadline short.
    this.#pool = new Pool(url.origin, {
      connections: options.concurrency,
      headersTimeout: 0,
      bodyTimeout: 0,
      maxResponseSize: this.#maxResponseBytes
    })
    this.#slots = new Slots(options.concurrency)
    this.#apiKey = options.apiKey
    this.#headers = { 'content-type': 'application/json', accept: 'application/json' }
    if (options.apiKey !== undefined) this.#headers.authorization = `Bearer ${options.apiKey}`
    this.#retries = options.retries ?? 2
    this.#retryBaseMs = options.retryBaseMs ?? 250
    this.#log = options.log
  }


  /** Text from the judge, cut short and with the key (should a server echo it) blanked out. */
  redact (text: string, max = 300): string {
    const cut = snippet(text, max + (this.#apiKey?.length ?? 0))
    const clean = this.#apiKey === undefined || this.#apiKey === '' ? cut : cut.split(this.#apiKey).join('[REDACTED]')
    return snippet(clean, max)
  }

  /** Sends a chat-completions request body (JSON) and returns the judge's completion. */
  async complete (payload: Buffer, deadline: Deadline): Promise<Completion> {
    const signal: StopSignal = deadline
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= this.#retries
      let status: number
      let text: string
      let retryAfterWaitMs: number | undefined
      try {
        ({ status, text, retryAfterWaitMs } = await this.#send(payload, signal))
      } catch (error) {
        if (signal.aborted) throw this.#timeout(error)
        const code = networkErrorCode(error)
        if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
          throw new ArbiterError('ARB_JUDGE_UNUSABLE', `the judge's answer is over ${this.#maxResponseBytes} bytes`, { cause: error })
        }
        /* c8 ignore next 3 -- an unknown failure from undici is not retried blindly; no test server can produce one on demand */
        if (!retryable(code)) {
          throw new ArbiterError('ARB_JUDGE_UNREACHABLE', `the judge at ${this.origin} failed: ${(error as Error).message}`, { cause: error, retryable: true })
        }
        this.#log.warn({ judge: this.origin, attempt, code }, 'judge unreachable')
        if (last) throw new ArbiterError('ARB_JUDGE_UNREACHABLE', `the judge at ${this.origin} could not be reached (${code}) after ${attempt + 1} attempts`, { cause: error })
        await this.#backoff(undefined, attempt, deadline, () => new ArbiterError('ARB_JUDGE_UNREACHABLE', `the judge at ${this.origin} could not be reached (${code})`, { cause: error }))
        continue
      }

      if (status >= 200 && status < 300) return this.#completion(text)

      const transient = status === 429 || status >= 500
      const failure = (why: string): ArbiterError => new ArbiterError('ARB_JUDGE_HTTP_STATUS',
        `the judge answered HTTP ${status}${why}`, { retryable: transient, details: { status, body: this.redact(text) } })
      this.#log.warn({ judge: this.origin, attempt, status }, 'judge answered with an error status')
      if (!transient) throw failure('')
      if (last) throw failure(` after ${attempt + 1} attempts`)
      await this.#backoff(retryAfterWaitMs, attempt, deadline, () => failure(` and its Retry-After (${(retryAfterWaitMs ?? 0) / 1000} s) is past the deadline`))
    }
  }

  async #send (payload: Buffer, signal: StopSignal): Promise<{ status: number, text: string, retryAfterWaitMs: number | undefined }> {
    const release = await this.#slots.acquire(signal)
    try {
      const answer = await exchange(this.#pool, { path: this.#path, headers: this.#headers, body: payload, signal, maxBytes: this.#maxResponseBytes })
      return { status: answer.status, text: answer.body.toString('utf8'), retryAfterWaitMs: retryAfterMs(answer.headers['retry-after']) }
    } finally {
      release()
    }
  }

  /** Sleeps before a retry, or throws `tooLate()` when the wait would pass the deadline. */
  async #backoff (retryAfterWaitMs: number | undefined, attempt: number, deadline: Deadline, tooLate: () => ArbiterError): Promise<void> {
    const delay = retryAfterWaitMs ?? this.#retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2)
    if (!deadline.fits(delay)) throw tooLate()
    try {
      await deadline.sleep(delay)
    } catch (error) {
      throw this.#timeout(error)
    }
  }

  #timeout (error: unknown): ArbiterError {
    return new ArbiterError('ARB_JUDGE_TIMEOUT', 'the judge did not answer within the deadline', { cause: error })
  }

  #completion (text: string): Completion {
    let data: unknown
    try {
      data = sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' })
    } catch {
      throw new ArbiterError('ARB_JUDGE_UNUSABLE', 'the judge server\'s answer is not JSON', { details: { raw: this.redact(text) } })
    }
    const record = (data ?? {}) as { model?: unknown, choices?: unknown, usage?: Record<string, unknown> }
    const choice = Array.isArray(record.choices) ? record.choices[0] as { message?: Record<string, unknown>, finish_reason?: unknown } | undefined : undefined
    if (choice === undefined || choice.message === null || typeof choice.message !== 'object') {
      throw new ArbiterError('ARB_JUDGE_UNUSABLE', 'the judge server\'s answer is not a chat completion (no choices[0].message)', { details: { raw: this.redact(text) } })
    }
    const message = choice.message
    const count = (value: unknown): number => typeof value === 'number' && Number.isFinite(value) ? value : 0
    return {
      // Some servers answer content as a list of parts ({type: 'text', text}).
      content: typeof message.content === 'string' ? message.content : Array.isArray(message.content) ? flattenTrajectory(message.content) : '',
      refusal: typeof message.refusal === 'string' && message.refusal !== '' ? message.refusal : undefined,
      finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : undefined,
      model: typeof record.model === 'string' ? record.model : undefined,
      usage: {
        prompt_tokens: count(record.usage?.prompt_tokens),
        completion_tokens: count(record.usage?.completion_tokens),
        total_tokens: count(record.usage?.total_tokens)
      }
    }
  }

  async close (): Promise<void> {
    await this.#pool.close()
  }
}
