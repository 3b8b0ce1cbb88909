// The `rubric` kind: resolve a versioned rubric from the store, have an OpenAI-compatible judge
// score the flattened trajectory against its dimensions, check the answer, and compute score
// and verdict here. Any failure on the way is a VerificationError (502) naming the rubric ref;
// nothing here ever answers a 0 in place of a verdict.
import { hash } from 'node:crypto'
import { Deadline } from '../../deadline.js'
import type { Config } from '../../config.js'
import { ArbiterError, VerificationError } from '../../errors.js'
import { snippet } from '../../snippet.js'
import { noTelemetry, type KindHandler, type Log, type Telemetry, type VerificationContext } from '../../registry.js'
import { flattenTrajectory } from '../../trajectory.js'
import type { RubricJudgeResult } from '../../../schemas/result.js'
import { LruTtlCache } from './cache.js'
import { JudgeClient, type Completion, type JudgeUsage } from './judge.js'
import { JudgeRequestTemplate, drawBoundary, reaskMessages, truncateMiddle, userMessage, type ChatMessage, type JudgeSettings } from './prompt.js'
import type { Rubric } from './rubric.js'
import { RubricStore } from './store.js'
import { aggregate, checkAnswer, score, type Aggregate, type JudgeAnswer } from './verdict.js'


export type RubricKindOptions = Pick<Config,
  'rubricsDir' | 'judgeBaseUrl' | 'judgeApiKey' | 'judgeModel' | 'judgeTimeoutS' | 'judgeConcurrency' |
  'judgeResponseFormat' | 'judgeMaxChars' | 'judgeCacheSize' | 'judgeCacheTtlS'> & {
  log: Log
  /** Counts judge calls, tokens and cache hits for /metrics. */
  telemetry?: Telemetry
  /** Tests: first retry backoff when the judge sends no Retry-After (default 250 ms). */
  judgeRetryBaseMs?: number
  /** Tests: the cache clock. */
  now?: () => number
  /** Largest judge answer read (default 8 MiB); larger is ARB_JUDGE_UNUSABLE. */
  judgeMaxResponseBytes?: number
}

/** What a successful judgement leaves in the cache: enough to rebuild the result exactly. */
interface Judged {
  aggregate: Aggregate
  models: string[]
  usage: JudgeUsage
  calls: number
  reasks: number
  /** The answer last served from this entry, frozen, and what it was served for (see `served` in verify). */
  served?: { rubric: Rubric, ref: string, passThreshold: number, truncated: boolean, result: RubricJudgeResult }
}

/** The judge request of one verification: its first body, and the body of a re-ask. */
interface JudgeRequest {
  body: Buffer
  reask: (answer: string, problem: string) => Buffer
}

function addUsage (into: JudgeUsage, more: JudgeUsage): void {
  into.prompt_tokens += more.prompt_tokens
  into.completion_tokens += more.completion_tokens
  into.total_tokens += more.total_tokens
}

function deepFreeze<T> (value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}

function textOf (value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined
  const text = flattenTrajectory(value)
  return text.trim() === '' ? undefined : text
}

export async function createRubricKind (options: RubricKindOptions): Promise<KindHandler> {
  const log = options.log
  const telemetry = options.telemetry ?? noTelemetry
  const store = await RubricStore.open(options.rubricsDir, log)
  const judge = options.judgeBaseUrl === undefined
    ? undefined
    : new JudgeClient({
      baseUrl: options.judgeBaseUrl,
      apiKey: options.judgeApiKey,
      concurrency: options.judgeConcurrency,
      log,
      retryBaseMs: options.judgeRetryBaseMs,
      maxResponseBytes: options.judgeMaxResponseBytes
    })
  const cache = new LruTtlCache<Judged>({ max: options.judgeCacheSize, ttlMs: options.judgeCacheTtlS * 1000, now: options.now })
  const inFlight = new Map<string, Promise<Judged>>()

  // Rubric objects are immutable snapshot members: their request template is built once, for
  // tasks with a reference and for tasks without (the rules mention it).
  const templates = new WeakMap<Rubric, Array<JudgeRequestTemplate | undefined>>()
  // `settings` follow from the rubric and the options, so one template per rubric holds.
  const templateOf = (rubric: Rubric, settings: JudgeSettings, hasReference: boolean): JudgeRequestTemplate => {
    let pair = templates.get(rubric)
    if (pair === undefined) templates.set(rubric, pair = [undefined, undefined])
    const slot = hasReference ? 1 : 0
    return pair[slot] ??= new JudgeRequestTemplate(rubric, settings, hasReference)
  }

  const fail = (code: ConstructorParameters<typeof VerificationError>[0], ref: string, message: string, extra: ConstructorParameters<typeof VerificationError>[3] = {}): VerificationError =>
    new VerificationError(code, { kind: 'rubric', ref }, message, extra)

  /** One judge answer for the rubric: a call, and one re-ask with the problem if it is unusable. */
  async function judgeOnce (rubric: Rubric, ref: string, request: JudgeRequest, deadline: Deadline, judged: Judged): Promise<JudgeAnswer> {
    const client = judge as JudgeClient
    let payload = request.body
    let problem = ''
    let content = ''
    for (let round = 0; round < 2; round++) {
      let completion: Completion
      try {
        completion = await client.complete(payload, deadline)
      } catch (error) {
        // A sample stopped because another one failed is not a judge call that timed out.
        const stoppedBySibling = deadline.aborted && !deadline.passed
        if (!stoppedBySibling) telemetry({ type: 'judge_call', outcome: error instanceof ArbiterError ? error.code : 'error' })
        /* c8 ignore next -- the client only throws ArbiterErrors; anything else is a bug the registry reports */
        if (!(error instanceof ArbiterError)) throw error
        throw fail(error.code, ref, `rubric ${rubric.ref}: ${error.message}`, { cause: error, retryable: error.retryable, details: error.details })
      }
      judged.calls++
      addUsage(judged.usage, completion.usage)
      telemetry({ type: 'judge_call', outcome: 'ok' })
      telemetry({ type: 'judge_tokens', prompt: completion.usage.prompt_tokens, completion: completion.usage.completion_tokens })
      if (completion.model !== undefined && !judged.models.includes(completion.model)) judged.models.push(completion.model)
      if (completion.refusal !== undefined || completion.finishReason === 'content_filter') {
        const said = completion.refusal ?? completion.content
        throw fail('ARB_JUDGE_REFUSED', ref, `rubric ${rubric.ref}: the judge refused to score${said === '' ? '' : `: ${client.redact(said, 200)}`}`,
          { details: { raw: client.redact(said === '' ? `finish_reason=${completion.finishReason}` : said) } })
      }
      content = completion.content
      const checked = checkAnswer(content, rubric)
      if (checked.ok) return checked.answer
      problem = client.redact(checked.problem, 1000) // it quotes the judge, which might echo the key
      log.warn({ rubric: rubric.ref, round, problem: snippet(problem, 300) }, 'judge answer unusable')
      if (round === 0) {
        judged.reasks++
        payload = request.reask(content, problem)
      }
    }
    throw fail('ARB_JUDGE_UNUSABLE', ref, `rubric ${rubric.ref}: the judge's answer was unusable after one re-ask: ${snippet(problem, 300)}`,
      { details: { problem: snippet(problem, 1000), raw: client.redact(content) } })
  }

  async function verify (context: VerificationContext): Promise<RubricJudgeResult> {
    const ref = context.manifest.verifier.ref
    const rubric = store.resolve(ref)
    const reference = textOf(context.task.reference)
    if (rubric.requiresReference && reference === undefined) {
      throw fail('ARB_RUBRIC_REFERENCE_REQUIRED', ref, `rubric ${rubric.ref} requires task.reference and the task has none`)
    }
    const model = rubric.judge.model ?? options.judgeModel
    if (judge === undefined || model === undefined) {
      const missing = judge === undefined ? 'ARBITER_JUDGE_BASE_URL' : 'ARBITER_JUDGE_MODEL'
      throw fail('ARB_JUDGE_NOT_CONFIGURED', ref, `rubric ${rubric.ref} needs a judge and none is configured (set ${missing})`)
    }
    const temperature = rubric.judge.temperature ?? 0
    const samples = rubric.judge.samples ?? 1
    const passThreshold = context.manifest.verifier.pass_threshold ?? rubric.passThreshold
    const taskPrompt = textOf(context.task.prompt)
    const trajectory = truncateMiddle(flattenTrajectory(context.trajectory), options.judgeMaxChars)

    const provenance = (judged: Judged): RubricJudgeResult['verifier'] => ({
      kind: 'rubric',
      ref,
      rubric: rubric.ref,
      version: rubric.version,
      content_hash: rubric.contentHash,
      judge_model: judged.models.length === 1 ? judged.models[0] : judged.models.length === 0 ? model : judged.models.join(','),
      judge_model_requested: model,
      temperature,
      samples,
      response_format: options.judgeResponseFormat,
      judge_calls: judged.calls,
      reasks: judged.reasks,
      usage: { ...judged.usage },
      disagreement: judged.aggregate.disagreement
    })
    const result = (judged: Judged, cached: boolean): RubricJudgeResult => {
      const scored = score(judged.aggregate, rubric, passThreshold)
      return {
        reward: scored.score,
        score: scored.score,
        verdict: scored.verdict,
        confidence: judged.aggregate.confidence,
        evidence: [...judged.aggregate.evidence], // copies: the cached entry must not be shared
        failed_criteria: scored.failed_criteria,
        dimension_scores: scored.dimension_scores,
        truncated: trajectory.truncated,
        cached,
        verifier: provenance(judged)
      }
    }

    const key = cache.enabled
      ? hash('sha256', JSON.stringify([rubric.contentHash, options.judgeBaseUrl, model, temperature, samples, options.judgeResponseFormat, options.judgeMaxChars, taskPrompt ?? null, reference ?? null, trajectory.text]), 'hex')
      : ''
    // A hit's answer depends only on the entry (the key covers the rubric's content, the judge
    // settings and the texts), the rubric as loaded now (its version: a reload can renumber the
    // same content), the ref it was asked by, the pass threshold and whether the trajectory was
    // cut; built once, it is served frozen to the hits after it.
    const served = (judged: Judged): RubricJudgeResult => {
      const last = judged.served
      if (last !== undefined && last.rubric === rubric && last.ref === ref && last.passThreshold === passThreshold && last.truncated === trajectory.truncated) return last.result
      const answer = deepFreeze(result(judged, true))
      judged.served = { rubric, ref, passThreshold, truncated: trajectory.truncated, result: answer }
      return answer
    }
    const hit = cache.enabled ? cache.get(key) : undefined
    if (hit !== undefined) {
      telemetry({ type: 'judge_cache_hit' })
      return served(hit)
    }
    // Identical verifications that miss at the same moment (a GRPO group often holds the same
    // short completion several times) share one judgement, success or failure, instead of each
    // calling the judge. Same ref and deadline too, so each gets exactly what it would have.
    const flight = cache.enabled ? `${key} ${context.timeoutMs} ${ref}` : ''
    const shared = cache.enabled ? inFlight.get(flight) : undefined
    if (shared !== undefined) {
      const judged = await shared
      telemetry({ type: 'judge_cache_hit' })
      return served(judged)
    }
    const judging = judgeNow(rubric, ref, { model, temperature, responseFormat: options.judgeResponseFormat }, samples, { taskPrompt, reference, trajectory: trajectory.text }, context.timeoutMs)
    if (cache.enabled) {
      inFlight.set(flight, judging)
      const landed = (): void => { inFlight.delete(flight) }
      judging.then(landed, landed)
    }
    const judged = await judging
    cache.set(key, judged)
    return result(judged, false)
  }

  /** Asks the judge (`samples` times, concurrently) within one deadline; checked and aggregated. */
  async function judgeNow (rubric: Rubric, ref: string, settings: JudgeSettings, samples: number, texts: { taskPrompt: string | undefined, reference: string | undefined, trajectory: string }, timeoutMs: number): Promise<Judged> {
    const boundary = drawBoundary([texts.taskPrompt ?? '', texts.reference ?? '', texts.trajectory])
    const template = templateOf(rubric, settings, texts.reference !== undefined)
    const user: ChatMessage = { role: 'user', content: userMessage({ ...texts, boundary }) }
    const request: JudgeRequest = {
      body: template.body(boundary, [user]), // the same bytes for every sample
      reask: (answer, problem) => template.body(boundary, [user, ...reaskMessages(answer, problem)])
    }
    // One deadline for the whole verification, and the first failing sample stops the others.
    const deadline = new Deadline(timeoutMs, 'judge')
    const judged: Judged = { aggregate: { dimensions: {}, confidence: 0, evidence: [], disagreement: 0 }, models: [], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, calls: 0, reasks: 0 }
    let answers: JudgeAnswer[]
    try {
      answers = await Promise.all(Array.from({ length: samples }, async () => await judgeOnce(rubric, ref, request, deadline, judged)))
    } catch (error) {
      deadline.stop(error) // the other samples stop: one failed sample fails the verification
      throw error
    } finally {
      deadline.clear()
    }
    judged.aggregate = aggregate(answers, rubric)
    return judged
  }

  return {
    kind: 'rubric',
    defaultTimeoutS: options.judgeTimeoutS,
    verify,
    describe: () => ({
      ...store.describe(),
      judge: {
        configured: judge !== undefined && options.judgeModel !== undefined,
        base_url: options.judgeBaseUrl === undefined ? undefined : (() => { const url = new URL(options.judgeBaseUrl); return `${url.protocol}//${url.host}${url.pathname}` })(),
        model: options.judgeModel,
        api_key_set: options.judgeApiKey !== undefined,
        response_format: options.judgeResponseFormat,
        timeout_s: options.judgeTimeoutS,
        concurrency: options.judgeConcurrency,
        max_chars: options.judgeMaxChars
      },
      cache: { enabled: cache.enabled, entries: cache.size, max: options.judgeCacheSize, ttl_s: options.judgeCacheTtlS }
    }),
    notReadyReason: () => store.storeError,
    reload: async () => { await store.reload() },
    close: async () => { await judge?.close() }
  }
}
