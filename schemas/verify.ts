// The request side of the wire contract for POST /v1/verify.
import { Type, type Static } from 'typebox'

export const VERIFIER_KINDS = ['rubric', 'plugin', 'endpoint'] as const
export type VerifierKind = typeof VERIFIER_KINDS[number]

export const VerifierSpecSchema = Type.Object({
  kind: Type.Enum(VERIFIER_KINDS, { description: 'rubric | plugin | endpoint' }),
  ref: Type.String({ minLength: 1, description: 'rubric: owner/name[@N]; plugin: module:callable; endpoint: http(s) URL' }),
  timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Deadline for this verifier, capped by ARBITER_MAX_TIMEOUT_S' })),
  pass_threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'success = reward >= pass_threshold when the verifier gives no success of its own (default 0.6)' }))
}, { additionalProperties: true })

export const ManifestSchema = Type.Object({
  name: Type.Optional(Type.String({ description: 'Environment name; selects the plugin for the plugin kind' })),
  version: Type.Optional(Type.String()),
  digest: Type.Optional(Type.String({ description: 'sha256:<hex> content digest the plugin must match' })),
  verifier: VerifierSpecSchema
}, { additionalProperties: true })
export type Manifest = Static<typeof ManifestSchema>

export const TaskSchema = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Any JSON object; prompt and reference are the fields verifiers usually read'
})
export type Task = Static<typeof TaskSchema>

export const VerifyRequestSchema = Type.Object({
  manifest: ManifestSchema,
  task: TaskSchema,
  trajectory: Type.Unknown({ description: 'Any JSON value, as the harness submitted it' })
}, { additionalProperties: true })
export type VerifyRequest = Static<typeof VerifyRequestSchema>
