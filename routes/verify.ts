// POST /v1/verify: validate, verify, shape the reply. No kind logic here.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { errorResponses } from '../schemas/error.js'
import { VerifyResponseSchema } from '../schemas/result.js'
import { VerifyRequestSchema } from '../schemas/verify.js'
import type { Verifications } from '../src/verification.js'

export const verifyRoutes: FastifyPluginAsyncTypebox<{ verifications: Verifications }> = async (app, { verifications }) => {
  app.post('/v1/verify', {
    schema: {
      tags: ['verification'],
      operationId: 'verify',
      summary: 'Verify one trajectory',
      description: '200 with the reward and a VerifierResult (plugin, endpoint) or RubricJudgeResult (rubric); 502 naming kind and ref when the verifier could not answer: never a reward of 0.',
      body: VerifyRequestSchema,
      response: { 200: VerifyResponseSchema, ...errorResponses }
    }
  }, async (request) => {
    return await verifications.verify(request.body, { requestId: request.id, log: request.log })
  })
}
