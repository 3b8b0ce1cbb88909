// POST /v1/verify: validate, hand to the registry, shape the reply. No kind logic here.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { errorResponses } from '../schemas/error.js'
import { VerifyResponseSchema } from '../schemas/result.js'
import { VerifyRequestSchema } from '../schemas/verify.js'
import type { Registry } from '../src/registry.js'
import { verifyOne, type VerificationEvent } from '../src/verification.js'

export interface VerifyRoutesOptions {
  registry: Registry
  observe?: (event: VerificationEvent) => void
}

export const verifyRoutes: FastifyPluginAsyncTypebox<VerifyRoutesOptions> = async (app, { registry, observe }) => {
  app.post('/v1/verify', {
    schema: {
      tags: ['verification'],
      summary: 'Verify one trajectory',
      description: '200 with the reward and a VerifierResult or RubricJudgeResult; 502 naming kind and ref when the verifier could not answer (never a reward of 0).',
      body: VerifyRequestSchema,
      response: { 200: VerifyResponseSchema, ...errorResponses }
    }
  }, async (request) => {
    return await verifyOne(registry, request.body, { requestId: request.id, log: request.log, observe })
  })
}
