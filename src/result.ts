// Turns what a plugin or endpoint verifier answered into a VerifierResult, in one place:
// `output` defaults to `message`, and `success` is the verifier's own word where it gave one,
// else reward >= pass_threshold (0.6 by default, the threshold Collinear's judge uses).
import type { Provenance, VerifierResult } from '../schemas/result.js'

export const DEFAULT_PASS_THRESHOLD = 0.6

export interface RawVerdict {
  reward: number
  success?: boolean
  message?: string
  output?: string
}

export function toVerifierResult (raw: RawVerdict, verifier: Provenance, passThreshold = DEFAULT_PASS_THRESHOLD): VerifierResult {
  const message = raw.message ?? ''
  return {
    reward: raw.reward,
    success: raw.success ?? raw.reward >= passThreshold,
    message,
    output: raw.output === undefined || raw.output === '' ? message : raw.output,
    verifier
  }
}
