// Every 4xx/5xx body: Fastify's error shape, extended. Declared on routes so the serializer
// keeps `verifier` and `retryable` instead of silently dropping them.
import { Type, type Static } from 'typebox'

export const ErrorBodySchema = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  code: Type.String({ description: 'Stable ARB_ code; see the README error table' }),
  message: Type.String(),
  verifier: Type.Optional(Type.Object({ kind: Type.String(), ref: Type.String() })),
  retryable: Type.Boolean(),
  requestId: Type.String(),
  details: Type.Optional(Type.Record(Type.String(), Type.Unknown()))
})
export type ErrorBody = Static<typeof ErrorBodySchema>

/** The error responses every route may give. */
export const errorResponses = {
  400: ErrorBodySchema,
  401: ErrorBodySchema,
  404: ErrorBodySchema,
  413: ErrorBodySchema,
  415: ErrorBodySchema,
  500: ErrorBodySchema,
  502: ErrorBodySchema,
  503: ErrorBodySchema
}
