// Reads and checks an endpoint's answer. The contract: a 2xx JSON object with a finite numeric
// `reward`; optional `success` (boolean), `message` and `output` (strings). Anything else is an
// error, never a zero: a missing, null, string, boolean or non-finite reward included.
import secureJson from 'secure-json-parse'
import { VerificationError, type VerifierIdentity } from '../../errors.js'
import { snippet } from '../../snippet.js'
import type { RawVerdict } from '../../result.js'

function describeValue (value: unknown): string {
  if (value === undefined) return 'missing'
  if (value === null) return 'null'
  if (typeof value === 'number') return String(value)
  return `${typeof value} ${snippet(JSON.stringify(value), 40)}`
}

/** The verdict in an endpoint's 2xx answer, or a VerificationError saying what is wrong with it. */
export function parseAnswer (text: string, verifier: VerifierIdentity, status: number): RawVerdict {
  let parsed: unknown
  try {
    parsed = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch (error) {
    throw new VerificationError('ARB_ENDPOINT_NOT_JSON', verifier,
      `endpoint answered ${status} with a body that is not JSON (${(error as Error).message}): ${snippet(text) || '(empty body)'}`)
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new VerificationError('ARB_ENDPOINT_NOT_JSON', verifier, `endpoint answered ${status} with JSON that is not an object: ${snippet(text)}`)
  }
  const answer = parsed as Record<string, unknown>
  const reward = answer.reward
  if (typeof reward !== 'number' || !Number.isFinite(reward)) {
    // JSON.parse reads 1e400 as Infinity: non-finite is as unusable as missing.
    throw new VerificationError('ARB_ENDPOINT_BAD_REWARD', verifier,
      `endpoint answer has no finite numeric "reward" (got ${describeValue(reward)}): ${snippet(text)}`)
  }
  const verdict: RawVerdict = { reward }
  if (answer.success !== undefined && answer.success !== null) {
    if (typeof answer.success !== 'boolean') throw badField('success', 'a boolean', answer.success, verifier)
    verdict.success = answer.success
  }
  for (const field of ['message', 'output'] as const) {
    const value = answer[field]
    if (value === undefined || value === null) continue
    if (typeof value !== 'string') throw badField(field, 'a string', value, verifier)
    verdict[field] = value
  }
  return verdict
}

function badField (field: string, expected: string, value: unknown, verifier: VerifierIdentity): VerificationError {
  return new VerificationError('ARB_ENDPOINT_BAD_RESPONSE', verifier, `endpoint answer's "${field}" must be ${expected} (got ${describeValue(value)})`)
}
