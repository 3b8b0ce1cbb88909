// The baseline: a bare Fastify POST route with the same body schema and validator as
// /v1/verify, answering a constant. Everything Arbiter adds is measured against this.
import Fastify from 'fastify'
import { TypeBoxValidatorCompiler } from '@fastify/type-provider-typebox'
import { VerifyRequestSchema } from '../../schemas/verify.js'

const app = Fastify({ logger: false })
app.setValidatorCompiler(TypeBoxValidatorCompiler)
app.post('/v1/verify', { schema: { body: VerifyRequestSchema } }, async () => ({ reward: 1, success: true, message: '', output: '' }))
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) })
