// Shared by the plugin-kind tests: build a handler over a plugins folder, call it like the
// registry does, and look at processes.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { createPluginKind, type PluginKindOptions } from '../../../src/kinds/plugin/index.js'
import type { KindHandler, Log } from '../../../src/registry.js'
import type { VerificationOutcome } from '../../../schemas/result.js'
import { VerificationError } from '../../../src/errors.js'

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
export const FIXTURES = `${ROOT}test/fixtures/plugins`
export const EXAMPLES = `${ROOT}examples/plugins`

export interface LogLine { level: string, obj: object | string, msg?: string }

export function memoryLog (): Log & { lines: LogLine[] } {
  const lines: LogLine[] = []
  const at = (level: string) => (obj: object | string, msg?: string) => { lines.push({ level, obj, msg }) }
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

interface Teardown { teardown: (fn: () => unknown) => void }

export async function makeKind (t: Teardown, overrides: Partial<PluginKindOptions> = {}): Promise<KindHandler & { log: ReturnType<typeof memoryLog> }> {
  const log = memoryLog()
  const handler = await createPluginKind({
    pluginsDir: FIXTURES,
    workers: 2,
    memoryMb: 512,
    idleS: 60,
    maxCalls: 10_000,
    log,
    ...overrides
  })
  t.teardown(async () => await handler.close?.())
  return Object.assign(handler, { log })
}

export interface CallOptions {
  timeoutS?: number
  version?: string
  digest?: string
  passThreshold?: number
}

export async function call (handler: KindHandler, name: string | undefined, ref: string, task: Record<string, unknown> = {}, trajectory: unknown = '', options: CallOptions = {}): Promise<VerificationOutcome> {
  const manifest: Record<string, unknown> = { verifier: { kind: 'plugin', ref } }
  if (name !== undefined) manifest.name = name
  if (options.version !== undefined) manifest.version = options.version
  if (options.digest !== undefined) manifest.digest = options.digest
  if (options.passThreshold !== undefined) (manifest.verifier as Record<string, unknown>).pass_threshold = options.passThreshold
  return await handler.verify({
    manifest: manifest as never,
    task,
    trajectory,
    requestId: 'test',
    timeoutMs: (options.timeoutS ?? 10) * 1000,
    log: memoryLog()
  })
}

/** The VerificationError a call fails with (fails the test if it succeeds). */
export async function failure (promise: Promise<unknown>): Promise<VerificationError> {
  try {
    const value = await promise
    throw new Error(`expected a VerificationError, got ${JSON.stringify(value)}`)
  } catch (error) {
    if (error instanceof VerificationError) return error
    throw error
  }
}

/** Whether a pid no longer runs (absent, or a zombie waiting for a reaper). */
export async function isGone (pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
  } catch {
    return true
  }
}

/** Waits (bounded) until the pid is gone; returns whether it went. */
export async function waitGone (pid: number, maxMs = 5000): Promise<boolean> {
  const until = Date.now() + maxMs
  while (Date.now() < until) {
    if (await isGone(pid)) return true
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return await isGone(pid)
}

export async function waitFor<T> (probe: () => Promise<T | undefined>, maxMs = 5000): Promise<T | undefined> {
  const until = Date.now() + maxMs
  while (Date.now() < until) {
    const value = await probe()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return undefined
}
