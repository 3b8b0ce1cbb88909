// Builds a ready app for a test and closes it in t.teardown. Logs go to an in-memory list so
// tests can assert on what was (and was not) logged.
import { Writable } from 'node:stream'
import { buildApp, type App, type BuildOptions } from '../../src/app.js'
import { configWith, type Config } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'

export interface TestContext { teardown: (fn: () => unknown) => void }

export interface TestApp {
  app: App
  logs: Array<Record<string, unknown>>
  /** The raw text of every log line, for "this secret never appears" checks. */
  logText: () => string
}

export async function buildTestApp (t: TestContext, overrides: Partial<Config> = {}, options: BuildOptions = {}): Promise<TestApp> {
  const lines: string[] = []
  const destination = new Writable({
    write (chunk: Buffer, _encoding, callback) { lines.push(chunk.toString('utf8')); callback() }
  })
  const config = configWith({ logLevel: 'debug', ...overrides })
  const app = await buildApp(config, { logger: createLogger(config.logLevel, { destination }), ...options })
  await app.ready()
  app.arbiter.lifecycle.markReady()
  t.teardown(async () => { await app.close() })
  return {
    app,
    get logs () { return lines.join('').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>) },
    logText: () => lines.join('')
  }
}

/** A POST /v1/verify body for the given verifier. */
export function verifyBody (kind: string, ref: string, extra: { task?: unknown, trajectory?: unknown, manifest?: Record<string, unknown>, verifier?: Record<string, unknown> } = {}): Record<string, unknown> {
  return {
    manifest: { name: 'test', version: '1.0.0', ...extra.manifest, verifier: { kind, ref, ...extra.verifier } },
    task: extra.task ?? { prompt: 'What is 2+2?', reference: '4' },
    trajectory: 'trajectory' in extra ? extra.trajectory : 'The answer is 4'
  }
}
