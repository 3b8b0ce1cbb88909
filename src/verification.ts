// One verification, from a validated request to a result body: a slot is taken (back-pressure),
// the ref's form is checked, the registry resolves and runs the verifier, and one summary log
// line is written whatever the outcome. /v1/verify and every item of /v1/verify/batch come
// through `Verifications.verify`.
import { performance } from 'node:perf_hooks'
import type { VerifyRequest } from '../schemas/verify.js'
import type { VerifyResponse } from '../schemas/result.js'
import type { Admission } from './admission.js'
import { ArbiterError } from './errors.js'
import { refProblem } from './refs.js'
import type { Log, Registry } from './registry.js'

/** One verification's summary: its log line's fields, and what /metrics counts. */
export interface VerificationEvent {
  kind: string
  ref: string
  outcome: 'ok' | 'error'
  code?: string
  message?: string
  reward?: number
  duration_ms: number
}

export interface VerificationsOptions {
  registry: Registry
  admission: Admission
  /** Called once per verification, for metrics. */
  observe?: (event: VerificationEvent) => void
}

export class Verifications {
  readonly #registry: Registry
  readonly #admission: Admission
  readonly #observe: (event: VerificationEvent) => void

  constructor (options: VerificationsOptions) {
    this.#registry = options.registry
    this.#admission = options.admission
    this.#observe = options.observe ?? (() => {})
  }

  async verify (input: VerifyRequest, context: { requestId: string, log: Log }): Promise<VerifyResponse> {
    const started = performance.now()
    const { kind, ref } = input.manifest.verifier
    let release: (() => void) | undefined
    try {
      const problem = refProblem(kind, ref)
      if (problem !== undefined) throw new ArbiterError('ARB_BAD_REQUEST', problem)
      // Most of the time a slot is free: taken without waiting a turn for a promise.
      release = this.#admission.tryAcquire() ?? await this.#admission.acquire()
      const outcome = await this.#registry.verify(input, context)
      const event: VerificationEvent = { kind, ref, outcome: 'ok', reward: outcome.reward, duration_ms: elapsed(started) }
      context.log.info(event, 'verification')
      this.#observe(event)
      return { ...outcome, duration_ms: event.duration_ms }
    } catch (error) {
      const code = error instanceof ArbiterError ? error.code : 'ARB_INTERNAL'
      const event: VerificationEvent = { kind, ref, outcome: 'error', code, message: (error as Error)?.message, duration_ms: elapsed(started) }
      context.log.info(event, 'verification')
      this.#observe(event)
      throw error
    } finally {
      release?.()
    }
  }
}

function elapsed (started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000
}
