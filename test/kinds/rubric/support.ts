// Shared by the rubric tests (not a test file itself: tap runs only *.test.ts).
import { fileURLToPath } from 'node:url'
import { createRubricKind, type RubricKindOptions } from '../../../src/kinds/rubric/index.js'
import type { KindHandler, Log, VerificationContext } from '../../../src/registry.js'
import { startFakeJudge, type FakeJudge, type Script } from '../../helpers/fake-judge.js'

export const FIXTURES = fileURLToPath(new URL('../../fixtures/rubrics/', import.meta.url))
export const API_KEY = 'sk-test-VERY-SECRET-0123456789'

export interface CapturedLog extends Log {
  lines: Array<{ level: string, obj: unknown, msg?: string }>
  text: () => string
}

export function captureLog (): CapturedLog {
  const lines: CapturedLog['lines'] = []
  const at = (level: string) => (obj: object | string, msg?: string) => { lines.push({ level, obj, msg }) }
  return {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    text: () => lines.map((line) => JSON.stringify(line, (_key, value) => value instanceof Error ? { message: value.message, stack: value.stack, cause: value.cause } : value)).join('\n')
  }
}

export function context (ref: string, task: Record<string, unknown>, trajectory: unknown, options: { timeoutMs?: number, passThreshold?: number, log?: Log } = {}): VerificationContext {
  return {
    manifest: { name: 'env', verifier: { kind: 'rubric', ref, ...(options.passThreshold === undefined ? {} : { pass_threshold: options.passThreshold }) } },
    task,
    trajectory,
    requestId: 'req-1',
    timeoutMs: options.timeoutMs ?? 5000,
    log: options.log ?? captureLog()
  }
}

/** A judge answer as a JSON string: scores by dimension name. */
export function answer (scores: Record<string, number | unknown>, extra: { unmet?: Record<string, string[]>, confidence?: unknown, evidence?: unknown } = {}): string {
  return JSON.stringify({
    dimension_scores: Object.entries(scores).map(([dimension, score]) => ({
      dimension,
      reason: `reason for ${dimension}`,
      unmet_criteria: extra.unmet?.[dimension] ?? [],
      score
    })),
    evidence: extra.evidence ?? ['the trajectory says 4'],
    confidence: extra.confidence ?? 0.9
  })
}

export const GOOD_MATH = answer({ correctness: 1, explanation: 0.5 }, { unmet: { explanation: ['C3'] } })

export interface Setup {
  judge: FakeJudge
  kind: KindHandler
  log: CapturedLog
}

/** A fake judge plus a rubric kind pointed at it, both closed at teardown. */
export async function setup (t: { teardown: (fn: () => unknown) => void }, script: Script = [], overrides: Partial<RubricKindOptions> = {}): Promise<Setup> {
  const judge = await startFakeJudge(script)
  t.teardown(judge.close)
  const log = captureLog()
  const kind = await createRubricKind({
    rubricsDir: FIXTURES,
    judgeBaseUrl: judge.url,
    judgeApiKey: API_KEY,
    judgeModel: 'judge-model-requested',
    judgeTimeoutS: 5,
    judgeConcurrency: 4,
    judgeResponseFormat: 'json_schema',
    judgeMaxChars: 80_000,
    judgeCacheSize: 0,
    judgeCacheTtlS: 60,
    judgeRetryBaseMs: 5,
    log,
    ...overrides
  })
  t.teardown(async () => { await kind.close?.() })
  return { judge, kind, log }
}

/** A judge answer scoring every dimension the request's schema names (json_schema mode). */
export function answerEvery (request: { body: any }, score = 1): string {
  const names: string[] = request.body.response_format.json_schema.schema.properties.dimension_scores.items.properties.dimension.enum
  return answer(Object.fromEntries(names.map((name) => [name, score])))
}
