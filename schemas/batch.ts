// POST /v1/verify/batch: many verifications in one call, answered in order.
import { Type, type Static } from 'typebox'
import { ManifestSchema } from './verify.js'

export function batchRequestSchema (maxItems: number) {
  return Type.Object({
    manifest: Type.Optional(ManifestSchema),
    items: Type.Array(Type.Object({}, { additionalProperties: true }), {
      minItems: 1,
      maxItems,
      description: 'Each {manifest, task, trajectory}; with a shared top-level manifest, each {task, trajectory} (an item\'s own manifest wins)'
    })
  }, { additionalProperties: false })
}
export type BatchRequest = Static<ReturnType<typeof batchRequestSchema>>

export const BatchResponseSchema = Type.Object({
  results: Type.Array(Type.Object({}, { additionalProperties: true }), {
    description: 'In item order: a /v1/verify 200 body, or an error body (it has statusCode and code)'
  }),
  ok: Type.Integer({ description: 'Items that produced a reward' }),
  failed: Type.Integer({ description: 'Items answered with an error body' })
})
export type BatchResponse = Static<typeof BatchResponseSchema>
