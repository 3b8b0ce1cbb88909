// GET /metrics: Prometheus text.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Metrics } from '../src/metrics.js'

export const metricsRoutes: FastifyPluginAsyncTypebox<{ metrics: Metrics }> = async (app, { metrics }) => {
  app.get('/metrics', { schema: { tags: ['operations'], summary: 'Prometheus metrics' } }, async (_request, reply) => {
    reply.header('content-type', metrics.contentType)
    return await metrics.text()
  })
}
