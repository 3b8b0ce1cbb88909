// One verification, from a validated request to a result body: the ref's form is checked,
// the registry resolves and runs the verifier, and one summary log line is written whatever
// the outcome. Both /v1/verify and each item of /v1/verify/batch come through here.
import { performance } from 'node:perf_hooks'
import type { VerifyRequest } from '../schemas/verify.js'
import type { VerifyResponse } from '../schemas/result.js'
import { ArbiterError } from './errors.js'
import { refProblem } from './refs.js'
import type { Log, Registry } from './registry.js'

export interface VerificationEvent {
  kind: string
  ref: string
  outcome: 'ok' | 'error'
  code?: string
  reward?: number
  durationMs: number
}

export interface VerifyOptions {
  requestId: string
  log: Log
  /** Called once per verification, for metrics. */
  observe?: (event: VerificationEvent) => void
}

export async function verifyOne (registry: Registry, input: VerifyRequest, options: VerifyOptions): Promise<VerifyResponse> {
  const started = performance.now()
  const { kind, ref } = input.manifest.verifier
  try {
    const problem = refProblem(kind, ref)
    if (problem !== undefined) throw new ArbiterError('ARB_BAD_REQUEST', problem)
    const outcome = await registry.verify({
      manifest: input.manifest,
      task: input.task,
      trajectory: input.trajectory,
      requestId: options.requestId,
      log: options.log
    })
    const durationMs = elapsed(started)
    options.log.info({ kind, ref, outcome: 'ok', reward: outcome.reward, duration_ms: durationMs }, 'verification')
    options.observe?.({ kind, ref, outcome: 'ok', reward: outcome.reward, durationMs })
    return { ...outcome, duration_ms: durationMs }
  } catch (error) {
    const durationMs = elapsed(started)
    const code = error instanceof ArbiterError ? error.code : 'ARB_INTERNAL'
    options.log.info({ kind, ref, outcome: 'error', code, message: (error as Error)?.message, duration_ms: durationMs }, 'verification')
    options.observe?.({ kind, ref, outcome: 'error', code, durationMs })
    throw error
  }
}

function elapsed (started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000
}
