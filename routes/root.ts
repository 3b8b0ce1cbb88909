// GET /: what this is and where to go next, for someone exploring with curl.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { NAME, VERSION } from '../src/version.js'

const RootSchema = Type.Object({
  name: Type.String(),
  version: Type.String(),
  description: Type.String(),
  routes: Type.Record(Type.String(), Type.String()),
  docs: Type.String()
})

export const rootRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/', { schema: { hide: true, response: { 200: RootSchema } } }, async () => ({
    name: NAME,
    version: VERSION,
    description: 'Verification service: POST {manifest, task, trajectory} to /v1/verify, get a reward or a 502 naming the verifier that failed.',
    routes: {
      'POST /v1/verify': 'verify one trajectory',
      'POST /v1/verify/batch': 'verify many, answered in order',
      'GET /v1/verifiers': 'what this instance can resolve',
      'GET /healthz': 'liveness',
      'GET /readyz': 'readiness',
      'GET /metrics': 'Prometheus metrics',
      'GET /openapi.json': 'OpenAPI document'
    },
    docs: '/docs'
  }))
}
