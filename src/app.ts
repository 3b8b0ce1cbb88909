// Builds the Arbiter Fastify instance from a Config. Never listens and never reads `process`:
// src/server.ts does that. Read top to bottom: the Fastify instance and its validator, the
// registry of verifier kinds and the services around it, the hooks and error handlers, the
// API documentation, then the routes.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { getHeapStatistics } from 'node:v8'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify'
import { TypeBoxValidatorCompiler, type TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import underPressure from '@fastify/under-pressure'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { Logger } from 'pino'
import { Admission } from './admission.js'
import { BearerAuth } from './auth.js'
import type { Config } from './config.js'
import { toErrorAnswer } from './error-body.js'
import { ArbiterError } from './errors.js'
import { exceedsDepth } from './json-depth.js'
import { createEndpointKind } from './kinds/endpoint/index.js'
import { createPluginKind } from './kinds/plugin/index.js'
import { createRubricKind } from './kinds/rubric/index.js'
import type { LookupFunction } from './kinds/endpoint/egress.js'
import { Lifecycle } from './lifecycle.js'
import { createLogger } from './logger.js'
import { Metrics } from './metrics.js'
import { Registry, type KindHandler, type Log, type Telemetry } from './registry.js'
import { Verifications } from './verification.js'
import { NAME, VERSION } from './version.js'
import { batchRoutes } from '../routes/batch.js'
import { healthRoutes } from '../routes/health.js'
import { metricsRoutes } from '../routes/metrics.js'
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

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>

export interface Arbiter {
  config: Config
  registry: Registry
  lifecycle: Lifecycle
  admission: Admission
  metrics: Metrics
}

declare module 'fastify' {
  interface FastifyInstance {
    arbiter: Arbiter
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** The kinds this instance serves, built from the config. */
export async function createRegistry (config: Config, log: Log, telemetry: Telemetry, options: BuildOptions = {}): Promise<Registry> {
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
      lookup: options.lookup,
      onRetry: (reason) => telemetry({ type: 'endpoint_retry', reason })
    }))
  }
  if (!given.has('plugin')) {
    registry.add(await createPluginKind({
      pluginsDir: config.pluginsDir,
      lockFile: config.pluginsLock,
      python: config.python,
      workers: config.pluginWorkers,
      memoryMb: config.pluginMemoryMb,
      idleS: config.pluginIdleS,
      maxCalls: config.pluginMaxCalls,
      log,
      telemetry
    }))
  }
  if (!given.has('rubric')) {
    // RubricKindOptions picks its settings (rubricsDir, judge*) from Config by name.
    registry.add(await createRubricKind({ ...config, log, telemetry }))
  }
  return registry
}

export async function buildApp (config: Config, options: BuildOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(config.logLevel)
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
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

  const admission = new Admission({ maxInFlight: config.maxInFlight, maxQueue: config.maxQueue })
  const metrics = new Metrics(() => admission.inFlight, () => admission.queued)
  const registry = await createRegistry(config, logger, metrics.kind, options)
  const verifications = new Verifications({ registry, admission, observe: metrics.verification })
  const lifecycle = new Lifecycle()
  const auth = BearerAuth.fromSettings(config.apiTokens, config.apiTokensFile)
  app.decorate('arbiter', { config, registry, lifecycle, admission, metrics })
  app.addHook('onClose', async () => { await registry.close() })

  // Hooks run on every request, so they are plain callbacks (no promise per hook).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    const url = request.url
    const isApi = url.startsWith('/v1/')
    if (auth.enabled && (isApi || (config.metricsAuth && url.startsWith('/metrics')))) {
      try {
        auth.check(request.headers.authorization)
      } catch (error) {
        metrics.rejected('unauthorized')
        reply.header('www-authenticate', 'Bearer realm="arbiter"')
        done(error as Error)
        return
      }
    }
    // While draining, every answer closes its connection, so clients stop reusing sockets that
    // are about to go away and open their next one elsewhere.
    if (lifecycle.draining) {
      reply.header('connection', 'close')
      if (isApi) {
        metrics.rejected('shutting_down')
        done(new ArbiterError('ARB_SHUTTING_DOWN', 'this instance is shutting down; retry on another replica', { retryAfter: 1 }))
        return
      }
    }
    done()
  })

  app.addHook('onResponse', (request, reply, done) => {
    metrics.response(request.routeOptions.url ?? 'unmatched', reply.statusCode)
    done()
  })

  // Event-loop lag and heap limits shed verification work with a 503; health, readiness and
  // metrics keep answering so the orchestrator sees a live, busy process rather than a dead one.
  await app.register(underPressure, {
    maxEventLoopDelay: config.maxEventLoopDelayMs,
    maxHeapUsedBytes: Math.floor(getHeapStatistics().heap_size_limit * 0.95),
    pressureHandler: async (request, _reply, type, value) => {
      if (!request.url.startsWith('/v1/verify')) return
      metrics.rejected('overloaded')
      throw new ArbiterError('ARB_OVERLOADED', `the instance is under pressure (${type}: ${Math.round(Number(value ?? 0))}); retry shortly`, { retryAfter: 1 })
    }
  })

  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body !== undefined && exceedsDepth(request.body, config.maxDepth)) {
      done(new ArbiterError('ARB_BAD_REQUEST', `body nests deeper than ${config.maxDepth} levels (ARBITER_MAX_DEPTH)`))
      return
    }
    done()
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

  await app.register(swagger, {
    openapi: {
      info: { title: NAME, version: VERSION, description: 'Verification service for RL and eval rollouts. A failed verification is a 502 naming the verifier, never a reward of 0.' },
      tags: [{ name: 'verification' }, { name: 'operations' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: auth.enabled ? [{ bearer: [] }] : []
    }
  })
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list', tryItOutEnabled: true } })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  await app.register(rootRoutes)
  await app.register(healthRoutes, { registry, lifecycle })
  await app.register(metricsRoutes, { metrics })
  await app.register(verifierRoutes, { registry })
  await app.register(verifyRoutes, { verifications })
  await app.register(batchRoutes, { verifications, maxItems: config.batchMaxItems, concurrency: config.batchConcurrency })
  return app
}
