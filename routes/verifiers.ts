// GET /v1/verifiers: what this instance can resolve, kind by kind.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { VERIFIER_KINDS } from '../schemas/verify.js'
import type { Registry } from '../src/registry.js'
import { VERSION } from '../src/version.js'

const KindSchema = Type.Object({ available: Type.Boolean() }, { additionalProperties: true })
const VerifiersSchema = Type.Object({
  version: Type.String(),
  kinds: Type.Record(Type.String(), KindSchema)
})

export const verifierRoutes: FastifyPluginAsyncTypebox<{ registry: Registry }> = async (app, { registry }) => {
  app.get('/v1/verifiers', { schema: { tags: ['verification'], response: { 200: VerifiersSchema } } }, async () => {
    const handlers = new Map(registry.handlers().map((handler) => [handler.kind, handler]))
    const kinds: Record<string, { available: boolean, [key: string]: unknown }> = {}
    for (const kind of VERIFIER_KINDS) {
      const handler = handlers.get(kind)
      kinds[kind] = handler === undefined
        ? { available: false, reason: 'not enabled on this instance' }
        : { available: true, ...handler.describe() }
    }
    return { version: VERSION, kinds }
  })
}
