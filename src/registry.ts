// Maps a verifier kind to its handler. The routes know nothing about kinds: they hand the
// request to `Registry.verify`, which is also the last line of defence for the one rule: a
// reward leaves here only if it is a finite number a handler produced, and any other failure
// becomes a VerificationError (502) naming kind and ref.
import type { Manifest, Task, VerifierKind } from '../schemas/verify.js'
import type { VerificationOutcome } from '../schemas/result.js'
import { ArbiterError, DuplicateKindError, VerificationError, type VerifierIdentity } from './errors.js'

/** The slice of a pino logger the kinds use, so they need no Fastify import. */
export interface Log {
  debug: (obj: object | string, msg?: string) => void
  info: (obj: object | string, msg?: string) => void
  warn: (obj: object | string, msg?: string) => void
  error: (obj: object | string, msg?: string) => void
}

/**
 * What a kind reports about its own machinery (retries, worker processes, judge calls) so
 * that /metrics can count it without the kinds importing a metrics library.
 */
export type KindEvent =
  | { type: 'endpoint_retry', reason: string }
  | { type: 'plugin_worker_start', plugin: string }
  | { type: 'plugin_worker_crash', plugin: string }
  | { type: 'plugin_timeout', plugin: string }
  | { type: 'judge_call', outcome: string }
  | { type: 'judge_tokens', prompt: number, completion: number }
  | { type: 'judge_cache_hit' }

export type Telemetry = (event: KindEvent) => void

export const noTelemetry: Telemetry = () => {}

export interface VerificationContext {
  manifest: Manifest
  task: Task
  trajectory: unknown
  requestId: string
  /** The deadline for this verification: verifier.timeout_s or the kind's default, capped. */
  timeoutMs: number
  log: Log
}

export interface KindHandler {
  readonly kind: VerifierKind
  /** Used when the manifest gives no verifier.timeout_s. */
  readonly defaultTimeoutS: number
  /** Resolves the verifier and returns its result, or throws a VerificationError. */
  verify: (context: VerificationContext) => Promise<VerificationOutcome>
  /** What this kind can resolve on this instance, for GET /v1/verifiers. */
  describe: () => Record<string, unknown>
  /** Why this kind is not ready to serve yet, or undefined when it is. */
  notReadyReason?: () => string | undefined
  /** Re-reads this kind's catalogue from disk (SIGHUP), atomically. */
  reload?: () => Promise<void>
  /** Releases workers, sockets and timers on shutdown. */
  close?: () => Promise<void>
}

export class Registry {
  readonly #handlers = new Map<VerifierKind, KindHandler>()
  readonly #maxTimeoutS: number

  constructor (options: { maxTimeoutS: number }) {
    this.#maxTimeoutS = options.maxTimeoutS
  }

  add (handler: KindHandler): this {
    if (this.#handlers.has(handler.kind)) throw new DuplicateKindError(handler.kind)
    this.#handlers.set(handler.kind, handler)
    return this
  }

  get (kind: VerifierKind, ref: string): KindHandler {
    const handler = this.#handlers.get(kind)
    if (handler === undefined) {
      throw new VerificationError('ARB_KIND_UNAVAILABLE', { kind, ref },
        `verifier kind "${kind}" is not available on this instance (available: ${[...this.#handlers.keys()].join(', ') || 'none'})`)
    }
    return handler
  }

  handlers (): KindHandler[] {
    return [...this.#handlers.values()]
  }

  timeoutMs (handler: KindHandler, manifest: Manifest): number {
    const requested = manifest.verifier.timeout_s ?? handler.defaultTimeoutS
    return Math.min(requested, this.#maxTimeoutS) * 1000
  }

  /** Runs the verifier `input.manifest` names, with this request's id and log line context. */
  async verify (input: Pick<VerificationContext, 'manifest' | 'task' | 'trajectory'>, request: Pick<VerificationContext, 'requestId' | 'log'>): Promise<VerificationOutcome> {
    const { kind, ref } = input.manifest.verifier
    const handler = this.get(kind, ref)
    let outcome: VerificationOutcome
    try {
      outcome = await handler.verify({
        manifest: input.manifest,
        task: input.task,
        trajectory: input.trajectory,
        requestId: request.requestId,
        timeoutMs: this.timeoutMs(handler, input.manifest),
        log: request.log
      })
    } catch (error) {
      const verifier: VerifierIdentity = { kind, ref }
      if (error instanceof VerificationError) throw error
      if (error instanceof ArbiterError) {
        // A kind's own code stands (a 502 of its kind, a 503 while shutting down); an internal
        // error from inside a verifier is still a verifier that failed, never a 500.
        const code = error.statusCode === 500 ? 'ARB_VERIFIER_FAILED' : error.code
        throw new VerificationError(code, verifier, error.message, { cause: error, retryable: error.retryable, details: error.details, retryAfter: error.retryAfter })
      }
      request.log.error({ err: error, verifier }, 'verifier failed unexpectedly')
      throw new VerificationError('ARB_VERIFIER_FAILED', verifier, `the ${verifier.kind} verifier failed unexpectedly: ${(error as Error)?.message ?? String(error)}`, { cause: error })
    }
    if (typeof outcome?.reward !== 'number' || !Number.isFinite(outcome.reward)) {
      throw new VerificationError('ARB_VERIFIER_FAILED', { kind, ref }, `the ${kind} verifier produced no finite reward`)
    }
    // The answer must say which verifier produced it (the response schema requires it): a
    // result without one would otherwise fail in serialization, as a 500.
    if (typeof outcome.verifier?.kind !== 'string' || typeof outcome.verifier.ref !== 'string') {
      throw new VerificationError('ARB_VERIFIER_FAILED', { kind, ref }, `the ${kind} verifier's result does not name its verifier (verifier.kind, verifier.ref)`)
    }
    return outcome
  }

  async reload (): Promise<void> {
    await Promise.all(this.handlers().map(async (handler) => await handler.reload?.()))
  }

  async close (): Promise<void> {
    await Promise.allSettled(this.handlers().map(async (handler) => await handler.close?.()))
  }
}
