// POST /v1/verify/batch: items are verified concurrently (bounded) and answered in order, each
// with its own result or its own error body; one bad item never fails the others. Only a
// malformed envelope (or too many items) fails the whole call, with a 400.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Compile } from 'typebox/compile'
import { BatchResponseSchema, batchRequestSchema } from '../schemas/batch.js'
import { errorResponses } from '../schemas/error.js'
import { VerifyRequestSchema, type VerifyRequest } from '../schemas/verify.js'
import { describeValidation, toErrorAnswer } from '../src/error-body.js'
import { ArbiterError } from '../src/errors.js'
import type { Verifications } from '../src/verification.js'

const itemCheck = Compile(VerifyRequestSchema)

export interface BatchRoutesOptions {
  verifications: Verifications
  maxItems: number
  concurrency: number
}

export const batchRoutes: FastifyPluginAsyncTypebox<BatchRoutesOptions> = async (app, { verifications, maxItems, concurrency }) => {
  app.post('/v1/verify/batch', {
    schema: {
      tags: ['verification'],
      operationId: 'verifyBatch',
      summary: 'Verify many trajectories in one call',
      description: `Up to ${maxItems} items (ARBITER_BATCH_MAX_ITEMS), verified concurrently and answered in order.`,
      body: batchRequestSchema(maxItems),
      response: { 200: BatchResponseSchema, ...errorResponses }
    }
  }, async (request) => {
    const { manifest, items } = request.body
    const results: Array<Record<string, unknown>> = new Array(items.length)
    let failed = 0

    const verifyItem = async (index: number): Promise<void> => {
      const requestId = `${request.id}#${index}`
      const log = request.log.child({ item: index })
      const item = manifest === undefined || 'manifest' in items[index] ? items[index] : { manifest, ...items[index] }
      try {
        if (!itemCheck.Check(item)) {
          throw new ArbiterError('ARB_BAD_REQUEST', `items[${index}]: ${describeValidation(itemCheck.Errors(item), 'item')}`)
        }
        results[index] = await verifications.verify(item as VerifyRequest, { requestId, log })
      } catch (error) {
        const answer = toErrorAnswer(error, requestId)
        if (answer.unexpected) log.error({ err: error }, 'unexpected error')
        results[index] = answer.body
        failed++
      }
    }

    let next = 0
    const lane = async (): Promise<void> => {
      while (next < items.length) await verifyItem(next++)
    }
    await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane))
    return { results, ok: items.length - failed, failed }
  })
}
