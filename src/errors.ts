// The one error catalogue. Every error a client can see has a stable `ARB_` code here, with its
// HTTP status and whether the same request may succeed later. The README's error table is
// checked against this list by a test, so a new code must be documented to pass CI.

import type { VerifierKind } from '../schemas/verify.js'

export interface CatalogueEntry {
  status: number
  retryable: boolean
  summary: string
}

function entry (status: number, retryable: boolean, summary: string): CatalogueEntry {
  return { status, retryable, summary }
}

export const catalogue = {
  // The request itself
  ARB_BAD_REQUEST: entry(400, false, 'The request body is malformed; the message names the field.'),
  ARB_UNAUTHORIZED: entry(401, false, 'A bearer token is required and was missing or wrong.'),
  ARB_NOT_FOUND: entry(404, false, 'No such route.'),
  ARB_BODY_TOO_LARGE: entry(413, false, 'The request body is over the body limit (ARBITER_BODY_LIMIT).'),
  ARB_UNSUPPORTED_MEDIA_TYPE: entry(415, false, 'The request body is not JSON (send content-type: application/json).'),
  ARB_OVERLOADED: entry(503, true, 'Too much work in flight; retry after Retry-After seconds.'),
  ARB_SHUTTING_DOWN: entry(503, true, 'The instance is draining; retry on another replica.'),
  ARB_INTERNAL: entry(500, false, 'A bug in Arbiter; the log has the cause under the request id.'),

  // Any kind
  ARB_KIND_UNAVAILABLE: entry(502, false, 'The verifier kind is not enabled on this instance.'),
  ARB_VERIFIER_FAILED: entry(502, false, 'The verifier failed in a way no more specific code covers; the log has the cause.'),

  // endpoint
  ARB_ENDPOINT_FORBIDDEN: entry(502, false, 'The egress guard refused the URL or the address it resolved to; no request was sent.'),
  ARB_ENDPOINT_DNS_FAILED: entry(502, true, 'The endpoint host name did not resolve.'),
  ARB_ENDPOINT_CONNECTION_REFUSED: entry(502, true, 'Nothing listens at the endpoint address.'),
  ARB_ENDPOINT_CONNECTION_RESET: entry(502, true, 'The endpoint closed the connection before a full answer.'),
  ARB_ENDPOINT_TIMEOUT: entry(502, true, 'The endpoint did not answer within the deadline.'),
  ARB_ENDPOINT_REDIRECT: entry(502, false, 'The endpoint answered with a redirect; redirects are never followed.'),
  ARB_ENDPOINT_HTTP_STATUS: entry(502, false, 'The endpoint answered with a non-2xx status (retryable for 429 and 5xx).'),
  ARB_ENDPOINT_RESPONSE_TOO_LARGE: entry(502, false, 'The endpoint answer was over the size cap (ARBITER_ENDPOINT_MAX_BYTES).'),
  ARB_ENDPOINT_NOT_JSON: entry(502, false, 'The endpoint answer was not a JSON object.'),
  ARB_ENDPOINT_BAD_REWARD: entry(502, false, 'The endpoint answer had no finite numeric `reward`.'),
  ARB_ENDPOINT_BAD_RESPONSE: entry(502, false, 'The endpoint answer had `success`, `message` or `output` of the wrong type.'),

  // plugin
  ARB_PLUGIN_NOT_FOUND: entry(502, false, 'No installed environment plugin has the manifest\'s name.'),
  ARB_PLUGIN_NOT_VETTED: entry(502, false, 'The plugin failed the digest gate (not pinned in the lock file, or its files changed).'),
  ARB_PLUGIN_DIGEST_MISMATCH: entry(502, false, 'The manifest\'s digest differs from the installed plugin\'s.'),
  ARB_PLUGIN_VERSION_MISMATCH: entry(502, false, 'The manifest\'s version differs from the installed plugin\'s.'),
  ARB_PLUGIN_MODULE_NOT_FOUND: entry(502, false, 'The ref\'s module is not a file inside the plugin folder.'),
  ARB_PLUGIN_IMPORT_FAILED: entry(502, false, 'Importing the plugin module raised; the message has the exception.'),
  ARB_PLUGIN_CALLABLE_NOT_FOUND: entry(502, false, 'The module has no attribute of the ref\'s callable name.'),
  ARB_PLUGIN_NOT_CALLABLE: entry(502, false, 'The ref\'s attribute exists but cannot be called.'),
  ARB_PLUGIN_RAISED: entry(502, false, 'The verifier raised; the message is the exception\'s.'),
  ARB_PLUGIN_BAD_RETURN: entry(502, false, 'The verifier returned something that is not a finite reward.'),
  ARB_PLUGIN_TIMEOUT: entry(502, true, 'The verifier did not return within the deadline; its worker was killed.'),
  ARB_PLUGIN_CRASHED: entry(502, true, 'The worker process died during the call (exit, signal, out of memory).'),
  ARB_PLUGIN_RUNTIME_UNAVAILABLE: entry(502, false, 'The plugin\'s runtime (python or node) cannot be started.'),

  // rubric
  ARB_RUBRIC_NOT_FOUND: entry(502, false, 'No rubric (or no such version) in the rubric store.'),
  ARB_RUBRIC_INVALID: entry(502, false, 'The rubric file is invalid; the message says why.'),
  ARB_RUBRIC_REFERENCE_REQUIRED: entry(502, false, 'The rubric requires task.reference and the task has none.'),
  ARB_JUDGE_NOT_CONFIGURED: entry(502, false, 'No judge is configured (ARBITER_JUDGE_BASE_URL, ARBITER_JUDGE_MODEL).'),
  ARB_JUDGE_UNREACHABLE: entry(502, true, 'The judge server could not be reached.'),
  ARB_JUDGE_TIMEOUT: entry(502, true, 'The judge did not answer within the deadline.'),
  ARB_JUDGE_HTTP_STATUS: entry(502, false, 'The judge answered with a non-2xx status (retryable for 429 and 5xx).'),
  ARB_JUDGE_REFUSED: entry(502, false, 'The judge refused to score.'),
  ARB_JUDGE_UNUSABLE: entry(502, false, 'The judge\'s answer was invalid even after one re-ask.')
} as const satisfies Record<string, CatalogueEntry>

export type ErrorCode = keyof typeof catalogue

export interface VerifierIdentity {
  kind: VerifierKind | string
  ref: string
}

export interface ArbiterErrorOptions {
  cause?: unknown
  /** Overrides the catalogue's default, e.g. an HTTP 503 from an upstream is retryable. */
  retryable?: boolean
  /** Extra fields for the client (status code of an upstream, raw judge text cut short). */
  details?: Record<string, unknown>
  /** Seconds, sent as Retry-After on 503s. */
  retryAfter?: number
}

/** Base of every error Arbiter answers with; `code` is stable and documented. */
export class ArbiterError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly retryable: boolean
  readonly details?: Record<string, unknown>
  readonly retryAfter?: number

  constructor (code: ErrorCode, message: string, options: ArbiterErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    const known = catalogue[code]
    this.name = 'ArbiterError'
    this.code = code
    this.statusCode = known.status
    this.retryable = options.retryable ?? known.retryable
    if (options.details !== undefined) this.details = options.details
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter
  }
}

/** A verifier could not produce a reward: always a 502 that names the verifier. */
export class VerificationError extends ArbiterError {
  readonly verifier: VerifierIdentity

  constructor (code: ErrorCode, verifier: VerifierIdentity, message: string, options: ArbiterErrorOptions = {}) {
    super(code, message, options)
    this.name = 'VerificationError'
    this.verifier = { kind: verifier.kind, ref: verifier.ref }
  }
}

/** A setting in the environment is invalid: the process exits at start naming it. */
export class ConfigError extends Error {
  readonly variable: string
  constructor (variable: string, message: string) {
    super(`${variable}: ${message}`)
    this.name = 'ConfigError'
    this.variable = variable
  }
}

/** A programming error in wiring kinds (registered twice): fails at boot, never per request. */
export class DuplicateKindError extends Error {
  constructor (kind: string) {
    super(`a handler for verifier kind "${kind}" is already registered`)
    this.name = 'DuplicateKindError'
  }
}
