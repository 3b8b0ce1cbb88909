// The ceiling for the endpoint kind: a bare Fastify route that forwards the body to the
// upstream with undici and relays the answer. No validation, no logging, no checks.
import Fastify from 'fastify'
import { Agent, request } from 'undici'

const upstream = process.env.UPSTREAM_URL ?? ''
const agent = new Agent({ connections: 128 })
const app = Fastify({ logger: false })
app.post('/v1/verify', async (req) => {
  const response = await request(upstream, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body: JSON.stringify(req.body) })
  return await response.body.json()
})
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) })
