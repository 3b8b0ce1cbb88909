// Builds the Arbiter Fastify instance from a Config. Never listens and never reads `process`:
// src/server.ts does that. Read top to bottom: the Fastify instance and its validator, the
// registry of verifier kinds, the hooks and error handlers, then the routes.
import { randomUUID } from 'node:crypto'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { TypeBoxValidatorCompiler, type TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Logger } from 'pino'
import type { Config } from './config.js'
import { toErrorAnswer } from './error-body.js'
import { ArbiterError } from './errors.js'
import { exceedsDepth } from './json-depth.js'
import { createEndpointKind } from './kinds/endpoint/index.js'
import type { LookupFunction } from './kinds/endpoint/egress.js'
import { Lifecycle } from './lifecycle.js'
import { createLogger } from './logger.js'
import { Registry, type KindHandler } from './registry.js'
import { healthRoutes } from '../routes/health.js'
import { rootRoutes } from '../routes/root.js'
import { verifierRoutes } from '../routes/verifiers.js'
import { verifyRoutes } from '../routes/verify.js'

export interface BuildOptions {
  logger?: Logger
  /** DNS lookup for the endpoint kind's egress guard (tests prove rebinding is refused). */
  lookup?: LookupFunction
  /** Handlers to register instead of the built-in ones for their kinds (tests). */
  kinds?: KindHandler[]
}

declare module 'fastify' {
  interface FastifyInstance {
    arbiter: { config: Config, registry: Registry, lifecycle: Lifecycle }
  }
}

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

export async function createRegistry (config: Config, options: BuildOptions = {}): Promise<Registry> {
  const registry = new Registry({ maxTimeoutS: config.maxTimeoutS })
  const given = new Map((options.kinds ?? []).map((handler) => [handler.kind, handler]))
  for (const handler of given.values()) registry.add(handler)
  if (!given.has('endpoint')) {
    registry.add(createEndpointKind({
      allow: config.endpointAllow,
      maxResponseBytes: config.endpointMaxBytes,
      connectionsPerOrigin: config.endpointConnections,
      retries: config.endpointRetries,
      maxTimeoutS: config.maxTimeoutS,
      lookup: options.lookup
    }))
  }
  return registry
}

export async function buildApp (config: Config, options: BuildOptions = {}): Promise<App> {
  const app = Fastify({
    loggerInstance: (options.logger ?? createLogger(config.logLevel)) as FastifyBaseLogger,
    bodyLimit: config.bodyLimit,
    // One summary line per verification (src/verification.ts) instead of two per request.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    return503OnClosing: false
  }).withTypeProvider<TypeBoxTypeProvider>()

  // JSON only: Fastify also parses text/plain by default, which would make a text body a
  // confusing "body must be object" instead of a 415.
  app.removeContentTypeParser('text/plain')
  // TypeBox's validator never coerces a body: `null` or `false` stay what they are, never 0.
  app.setValidatorCompiler(TypeBoxValidatorCompiler)

  const registry = await createRegistry(config, options)
  const lifecycle = new Lifecycle()
  app.decorate('arbiter', { config, registry, lifecycle })
  app.addHook('onClose', async () => { await registry.close() })

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
    if (lifecycle.draining && request.url.startsWith('/v1/')) {
      throw new ArbiterError('ARB_SHUTTING_DOWN', 'this instance is shutting down; retry on another replica', { retryAfter: 1 })
    }
  })

  app.addHook('preValidation', async (request) => {
    if (request.body !== undefined && exceedsDepth(request.body, config.maxDepth)) {
      throw new ArbiterError('ARB_BAD_REQUEST', `body nests deeper than ${config.maxDepth} levels (ARBITER_MAX_DEPTH)`)
    }
  })

  app.setErrorHandler(async (error, request, reply) => {
    const answer = toErrorAnswer(error, request.id)
    if (answer.unexpected) request.log.error({ err: error }, 'unexpected error')
    if (answer.retryAfter !== undefined) reply.header('retry-after', String(answer.retryAfter))
    return await reply.code(answer.body.statusCode).send(answer.body)
  })

  app.setNotFoundHandler(async (request, reply) => {
    const error = new ArbiterError('ARB_NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}; GET / lists the routes`)
    return await reply.code(404).send(toErrorAnswer(error, request.id).body)
  })

  await app.register(rootRoutes)
  await app.register(healthRoutes, { registry, lifecycle })
  await app.register(verifierRoutes, { registry })
  await app.register(verifyRoutes, { registry })
  return app
}
