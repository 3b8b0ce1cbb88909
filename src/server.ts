// The only file that touches `process`: environment → Config → app → listen, then signals.
// SIGTERM/SIGINT drain (readiness turns 503, new work is refused, work in flight finishes within
// ARBITER_GRACE_S, workers and pools close) and exit 0; a second signal exits at once.
// SIGHUP reloads the rubric and plugin catalogues without a restart.
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { loadConfig } from './config.js'
import { ConfigError } from './errors.js'
import { createLogger } from './logger.js'

const DRAIN_POLL_MS = 50

/** pino-pretty is a dev dependency: a production image on a terminal logs JSON instead. */
function canResolve (specifier: string): boolean {
  try {
    import.meta.resolve(specifier)
    return true
  } catch {
    return false
  }
}

/** Runs `step`; an invalid setting it finds ends the process with a message naming it. */
async function orExitOnConfigError<T> (step: () => T | Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`arbiter: invalid setting ${error.message}\n`)
      process.exit(78) // EX_CONFIG
    }
    throw error
  }
}

async function main (): Promise<void> {
  const config = await orExitOnConfigError(() => loadConfig(process.env))
  const logger = createLogger(config.logLevel, { pretty: process.stdout.isTTY === true && canResolve('pino-pretty') })
  if (process.env.ARBITER_API_TOKENS !== undefined && config.apiTokens.length === 0 && config.apiTokensFile === undefined) {
    logger.warn('ARBITER_API_TOKENS is set but holds no token: authentication is OFF')
  }
  const app = await orExitOnConfigError(async () => await buildApp(config, { logger }))
  const { lifecycle, registry, admission } = app.arbiter

  closeWithGrace({ delay: config.graceS * 1000, logger }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'shutting down after an unhandled error')
    logger.info({ signal, graceS: config.graceS, inFlight: admission.inFlight }, 'draining: finishing work in flight')
    lifecycle.startDraining()
    // Keep listening while verifications finish, so new work and readiness probes get a clear
    // 503 (with Retry-After) instead of a refused connection; then close sockets and workers.
    while (admission.inFlight > 0 || admission.queued > 0) await sleep(DRAIN_POLL_MS)
    await app.close()
    logger.info('stopped')
  })

  process.on('SIGHUP', () => {
    registry.reload().then(
      () => logger.info('catalogues reloaded'),
      (error: unknown) => logger.error({ err: error }, 'reload failed; still serving the previous catalogues')
    )
  })

  await app.listen({ host: config.host, port: config.port })
  lifecycle.markReady()
}

main().catch((error: unknown) => {
  process.stderr.write(`arbiter: failed to start: ${(error as Error)?.stack ?? String(error)}\n`)
  process.exit(1)
})
