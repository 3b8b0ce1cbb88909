// Liveness and readiness for the orchestrator. /healthz answers while the process and its event
// loop do; /readyz only when catalogues are loaded, runtimes are there and we are not draining.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Lifecycle } from '../src/lifecycle.js'
import type { Registry } from '../src/registry.js'

const HealthSchema = Type.Object({ status: Type.String(), reasons: Type.Optional(Type.Array(Type.String())) })

export interface HealthRoutesOptions {
  registry: Registry
  lifecycle: Lifecycle
}

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { registry, lifecycle }) => {
  app.get('/healthz', { schema: { tags: ['operations'], response: { 200: HealthSchema } } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { schema: { tags: ['operations'], response: { 200: HealthSchema, 503: HealthSchema } } }, async (_request, reply) => {
    const reasons: string[] = []
    if (lifecycle.phase === 'starting') reasons.push('starting: not listening yet')
    if (lifecycle.phase === 'draining') reasons.push('draining: shutting down, finishing work in flight')
    for (const handler of registry.handlers()) {
      const reason = handler.notReadyReason?.()
      if (reason !== undefined) reasons.push(`${handler.kind}: ${reason}`)
    }
    if (reasons.length === 0) return { status: 'ready' }
    reply.code(503).header('retry-after', '1')
    return { status: lifecycle.phase === 'ready' ? 'not ready' : lifecycle.phase, reasons }
  })
}
