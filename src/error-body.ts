// Turns anything thrown while answering into the one error body shape (schemas/error.ts).
// Used by the app's error handler and by the batch route for each failed item, so a single
// verification and a batch item fail identically.
import { STATUS_CODES } from 'node:http'
import type { ErrorBody } from '../schemas/error.js'
import { ArbiterError, VerificationError, catalogue, type ErrorCode } from './errors.js'

export interface ErrorAnswer {
  body: ErrorBody
  /** Seconds for the Retry-After header (503s). */
  retryAfter?: number
  /** True when nothing about the error is known: log it with its stack. */
  unexpected: boolean
}

interface FastifyLikeError {
  code?: string
  statusCode?: number
  message?: string
  validation?: Array<{ instancePath?: string, message?: string, params?: Record<string, unknown>, keyword?: string }>
  validationContext?: string
}

function body (code: ErrorCode, message: string, requestId: string, extra: Partial<ErrorBody> = {}): ErrorBody {
  const status = catalogue[code].status
  return {
    statusCode: status,
    error: STATUS_CODES[status] ?? 'Error',
    code,
    message,
    retryable: catalogue[code].retryable,
    requestId,
    ...extra
  }
}

/** `/manifest/verifier/kind` → `manifest.verifier.kind`; the field a person would look for. */
function fieldName (context: string | undefined, instancePath: string | undefined, missing?: unknown): string {
  const parts = (instancePath ?? '').split('/').filter((part) => part !== '').map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (typeof missing === 'string') parts.push(missing)
  return parts.length > 0 ? parts.join('.') : (context ?? 'body')
}

export type ValidationIssue = NonNullable<FastifyLikeError['validation']>[number]

/** One sentence naming the offending field, from a schema validator's first complaint. */
export function describeValidation (issues: ValidationIssue[] | undefined, context = 'body'): string {
  const first = issues?.[0]
  if (first === undefined) return `${context} is invalid`
  const params = first.params ?? {}
  const missing = Array.isArray(params.requiredProperties) ? params.requiredProperties[0] : params.missingProperty
  const field = fieldName(context, first.instancePath, missing)
  if (missing !== undefined) return `${field} is required`
  if (first.keyword === 'enum' && Array.isArray(params.allowedValues)) return `${field} must be one of ${params.allowedValues.join('|')}`
  return `${field} ${first.message ?? 'is invalid'}`
}

export function toErrorAnswer (error: unknown, requestId: string): ErrorAnswer {
  if (error instanceof ArbiterError) {
    const extra: Partial<ErrorBody> = { retryable: error.retryable }
    if (error instanceof VerificationError) extra.verifier = error.verifier
    if (error.details !== undefined) extra.details = error.details
    const answer: ErrorAnswer = { body: body(error.code, error.message, requestId, extra), unexpected: false }
    if (error.retryAfter !== undefined) answer.retryAfter = error.retryAfter
    return answer
  }
  const known = error as FastifyLikeError
  if (known?.validation !== undefined) {
    return { body: body('ARB_BAD_REQUEST', describeValidation(known.validation, known.validationContext), requestId), unexpected: false }
  }
  switch (known?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { body: body('ARB_BODY_TOO_LARGE', `${known.message ?? 'request body is too large'} (limit set by ARBITER_BODY_LIMIT)`, requestId), unexpected: false }
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { body: body('ARB_UNSUPPORTED_MEDIA_TYPE', `${known.message ?? 'unsupported media type'}; send a JSON body with content-type: application/json`, requestId), unexpected: false }
  }
  const status = known?.statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // Fastify's own 4xx: bad JSON, empty body, forbidden __proto__ keys, bad content-length.
    const reason = known.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'body must be a JSON object, got an empty body' : `body is not valid JSON: ${known.message ?? 'parse error'}`
    return { body: body('ARB_BAD_REQUEST', reason, requestId), unexpected: false }
  }
  return { body: body('ARB_INTERNAL', `internal error; the server log has the cause under request id ${requestId}`, requestId), unexpected: true }
}
