// Arbiter checks the judge's answer and computes the verdict itself: the judge scores
// dimensions, Arbiter does the arithmetic. Nothing here turns a bad answer into a number: an
// answer either passes every check or is rejected with a reason the judge is re-asked with.
import sjson from 'secure-json-parse'
import type { DimensionScore } from '../../../schemas/result.js'
import type { Rubric } from './rubric.js'

export interface DimensionAnswer {
  score: number
  reason: string
  /** Criterion ids the judge marked unmet. */
  unmet: string[]
}

export interface JudgeAnswer {
  dimensions: Record<string, DimensionAnswer>
  confidence: number
  evidence: string[]
}

export type Checked = { ok: true, answer: JudgeAnswer } | { ok: false, problem: string }

/** The JSON text inside a judge's message: the whole of it, a fenced block, or the outer braces (after any <think> block). */
export function extractJson (content: string): string {
  // Reasoning models served by Ollama or vLLM may think aloud first, braces included.
  const text = content.replace(/<think>[\s\S]*?<\/think>/g, '').trim()
  const fenced = /```[A-Za-z0-9_-]*[ \t]*\r?\n([\s\S]*?)\r?\n?```/.exec(text)
  if (fenced !== null) return fenced[1].trim()
  if (text.startsWith('{')) return text
  const first = text.indexOf('{')
  const last = text.lastIndexOf('}')
  return first !== -1 && last > first ? text.slice(first, last + 1) : text
}

function isUnit (value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 1
}

function show (value: unknown): string {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 40 ? `${text.slice(0, 40)}…` : text
}

/** Parses and checks one answer against the rubric; every problem found, joined, when invalid. */
export function checkAnswer (content: string, rubric: Rubric): Checked {
  if (content.trim() === '') return { ok: false, problem: 'the answer was empty' }
  let data: unknown
  try {
    data = sjson.parse(extractJson(content), null, { protoAction: 'error', constructorAction: 'error' })
  } catch (error) {
    return { ok: false, problem: `the answer is not valid JSON (${(error as Error).message})` }
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return { ok: false, problem: 'the answer is not a JSON object' }
  const record = data as Record<string, unknown>
  const problems: string[] = []
  const dimensions: Record<string, DimensionAnswer> = {}
  const byName = new Map(rubric.dimensions.map((dimension) => [dimension.name, dimension]))

  if (!Array.isArray(record.dimension_scores)) {
    problems.push('dimension_scores must be an array with one object per rubric dimension')
  } else {
    record.dimension_scores.forEach((item: unknown, index: number) => {
      if (item === null || typeof item !== 'object' || Array.isArray(item)) {
        problems.push(`dimension_scores[${index}] is not an object`)
        return
      }
      const entry = item as Record<string, unknown>
      const name = entry.dimension
      const dimension = typeof name === 'string' ? byName.get(name) : undefined
      if (dimension === undefined) {
        problems.push(`dimension_scores[${index}].dimension ${show(name)} is not a rubric dimension (expected one of ${[...byName.keys()].map((key) => JSON.stringify(key)).join(', ')})`)
        return
      }
      if (dimensions[dimension.name] !== undefined) {
        problems.push(`dimension "${dimension.name}" is scored more than once`)
        return
      }
      if (!isUnit(entry.score)) problems.push(`the score of "${dimension.name}" must be a number between 0 and 1, got ${show(entry.score)}`)
      if (entry.reason !== undefined && typeof entry.reason !== 'string') problems.push(`the reason of "${dimension.name}" must be a string`)
      const unmet: string[] = []
      if (entry.unmet_criteria !== undefined) {
        if (!Array.isArray(entry.unmet_criteria)) {
          problems.push(`unmet_criteria of "${dimension.name}" must be an array of criterion ids`)
        } else {
          for (const raw of entry.unmet_criteria as unknown[]) {
            const criterion = dimension.criteria.find((candidate) => candidate.id === raw || candidate.text === raw)
            if (criterion === undefined) {
              const ids = dimension.criteria.map((candidate) => candidate.id)
              problems.push(`unmet_criteria of "${dimension.name}" names ${show(raw)}, which is not one of its criteria (${ids.length === 0 ? 'it has none' : ids.join(', ')})`)
            } else if (!unmet.includes(criterion.id)) {
              unmet.push(criterion.id)
            }
          }
        }
      }
      dimensions[dimension.name] = { score: entry.score as number, reason: typeof entry.reason === 'string' ? entry.reason : '', unmet }
    })
    const missing = rubric.dimensions.filter((dimension) => dimensions[dimension.name] === undefined)
    if (missing.length > 0) problems.push(`missing dimension${missing.length > 1 ? 's' : ''}: ${missing.map((dimension) => JSON.stringify(dimension.name)).join(', ')}`)
  }
  if (!isUnit(record.confidence)) problems.push(`confidence must be a number between 0 and 1, got ${show(record.confidence)}`)
  if (!Array.isArray(record.evidence) || !record.evidence.every((item: unknown) => typeof item === 'string')) {
    problems.push('evidence must be an array of strings')
  }
  if (problems.length > 0) return { ok: false, problem: problems.join('; ') }
  return { ok: true, answer: { dimensions, confidence: record.confidence as number, evidence: record.evidence as string[] } }
}

export interface Aggregate {
  dimensions: Record<string, DimensionAnswer>
  confidence: number
  evidence: string[]
  /** Mean over dimensions of the standard deviation of the samples' scores. */
  disagreement: number
}

/**
 * Combines N valid answers: each dimension's score is the mean of the samples'; its reason is
 * that of the sample closest to the mean; a criterion is unmet when at least half the samples
 * say so; evidence is the union; confidence is the samples' mean confidence times
 * (1 − 2 × disagreement), where disagreement is the mean standard deviation of the dimension
 * scores (0 when the samples agree, at most 0.5).
 */
export function aggregate (answers: JudgeAnswer[], rubric: Rubric): Aggregate {
  const n = answers.length
  const dimensions: Record<string, DimensionAnswer> = {}
  let spread = 0
  for (const dimension of rubric.dimensions) {
    const samples = answers.map((answer) => answer.dimensions[dimension.name])
    const mean = samples.reduce((sum, sample) => sum + sample.score, 0) / n
    const deviation = Math.sqrt(samples.reduce((sum, sample) => sum + (sample.score - mean) ** 2, 0) / n)
    spread += deviation
    const closest = samples.reduce((best, sample) => Math.abs(sample.score - mean) < Math.abs(best.score - mean) ? sample : best)
    const unmet = dimension.criteria
      .filter((criterion) => samples.filter((sample) => sample.unmet.includes(criterion.id)).length * 2 >= n)
      .map((criterion) => criterion.id)
    dimensions[dimension.name] = { score: mean, reason: closest.reason, unmet }
  }
  const disagreement = spread / rubric.dimensions.length
  const meanConfidence = answers.reduce((sum, answer) => sum + answer.confidence, 0) / n
  const confidence = Math.min(1, Math.max(0, meanConfidence * (1 - 2 * disagreement)))
  const evidence = [...new Set(answers.flatMap((answer) => answer.evidence))]
  return { dimensions, confidence, evidence, disagreement }
}

export interface Scored {
  score: number
  verdict: 'PASS' | 'FAIL'
  dimension_scores: DimensionScore[]
  failed_criteria: string[]
}

/** Tolerance for the threshold comparison, so that 0.6 from (0.3 + 0.9) / 2 still passes 0.6. */
const EPSILON = 1e-9

/** The weighted mean of the dimension scores, and PASS when it reaches the threshold. */
export function score (result: Aggregate, rubric: Rubric, passThreshold: number): Scored {
  let weighted = 0
  let weights = 0
  for (const dimension of rubric.dimensions) {
    weighted += dimension.weight * result.dimensions[dimension.name].score
    weights += dimension.weight
  }
  const value = Math.min(1, Math.max(0, weighted / weights))
  return {
    score: value,
    verdict: value >= passThreshold - EPSILON ? 'PASS' : 'FAIL',
    dimension_scores: rubric.dimensions.map((dimension) => ({
      dimension: dimension.name,
      score: result.dimensions[dimension.name].score,
      reason: result.dimensions[dimension.name].reason
    })),
    failed_criteria: rubric.dimensions.flatMap((dimension) => dimension.criteria
      .filter((criterion) => result.dimensions[dimension.name].unmet.includes(criterion.id))
      .map((criterion) => criterion.text))
  }
}
