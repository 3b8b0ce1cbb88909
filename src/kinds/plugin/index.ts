// The `plugin` kind: `ref` is `module:callable` inside a vetted environment plugin, selected by
// `manifest.name`, run out of the server's process in a pool of persistent workers per plugin
// (see pool.ts for the workers, catalog.ts for the digest gate, resolve.ts for module paths).
import { noTelemetry, type KindHandler, type Log, type Telemetry, type VerificationContext } from '../../registry.js'
import type { Provenance, VerificationOutcome } from '../../../schemas/result.js'
import { VerificationError, type ErrorCode, type VerifierIdentity } from '../../errors.js'
import { parsePluginRef } from '../../refs.js'
import { toVerifierResult } from '../../result.js'
import { describeEntry, scanPlugins, type Catalog, type PluginEntry, type Runtime } from './catalog.js'
import { digestFolder } from './digest.js'
import { PluginPool } from './pool.js'
import { resolveModule, type Resolution } from './resolve.js'
import { batchScheduling, resolvePython, scrubbedEnv, spawnSpec, type PythonRuntime } from './runtimes.js'

export const DEFAULT_PLUGIN_TIMEOUT_S = 60

/** A ref of a vetted plugin, ready to call. */
interface Target {
  identity: VerifierIdentity
  module: string
  callable: string
  file: string
  pool: PluginPool
  provenance: Provenance
}

function failure (ref: string, code: ErrorCode, message: string): VerificationError {
  return new VerificationError(code, { kind: 'plugin', ref }, message)
}

const POOL_EVENTS = { start: 'plugin_worker_start', crash: 'plugin_worker_crash', timeout: 'plugin_timeout' } as const

export interface PluginKindOptions {
  pluginsDir: string
  lockFile?: string
  /** ARBITER_PYTHON; default: `python3` on PATH, resolved once to the real binary. */
  python?: string
  /** Worker processes per plugin at most. */
  workers: number
  memoryMb: number
  idleS: number
  maxCalls: number
  log: Log
  /** Worker starts, crashes and timeouts for /metrics. */
  telemetry?: Telemetry
  /** The environment workers inherit from, before scrubbing; default process.env. */
  env?: Record<string, string | undefined>
}

/** One catalog and what was worked out from it; a reload replaces all of it at once. */
interface State {
  catalog: Catalog
  /** Module resolutions that succeeded, per plugin folder and module. */
  resolutions: Map<string, Promise<Resolution>>
  /** Refs a call succeeded through, per vetted plugin and ref: what the next call needs. */
  targets: Map<PluginEntry, Map<string, Target>>
}

async function inferRuntime (plugin: PluginEntry): Promise<void> {
  if (plugin.runtime !== undefined || plugin.verifier?.kind !== 'plugin') return
  const ref = parsePluginRef(plugin.verifier.ref)
  if (ref === undefined) return
  const resolved = await resolveModule(plugin.path, ref.module)
  if (resolved.ok) plugin.runtime = resolved.value.runtime
}

export async function createPluginKind (options: PluginKindOptions): Promise<KindHandler> {
  const log = options.log
  const telemetry = options.telemetry ?? noTelemetry
  const env = scrubbedEnv(options.env ?? process.env)
  const pythonCommand = options.python ?? 'python3'

  const load = async (): Promise<State> => {
    const catalog = await scanPlugins(options.pluginsDir, options.lockFile)
    await Promise.all(catalog.plugins.filter((p) => p.status === 'vetted').map(inferRuntime))
    for (const plugin of catalog.plugins) {
      if (plugin.status === 'refused') log.warn({ folder: plugin.folder, name: plugin.name, reason: plugin.reason }, 'environment plugin refused')
      else log.info({ name: plugin.name, version: plugin.version, runtime: plugin.runtime, digest: plugin.digest }, 'environment plugin vetted')
    }
    return { catalog, resolutions: new Map(), targets: new Map() }
  }

  let python: PythonRuntime | undefined
  let pythonProblem: string | undefined
  const [initial] = await Promise.all([
    load(),
    resolvePython(pythonCommand).then((found) => { python = found }, (error: Error) => { pythonProblem = error.message })
  ])
  let state = initial
  if (pythonProblem !== undefined) log.warn({ python: pythonCommand, reason: pythonProblem }, 'python runtime unavailable')

  /** Pools by the vetted files they run (path and digest), then by runtime. */
  const pools = new Map<string, Map<Runtime, PluginPool>>()
  const filesKey = (plugin: PluginEntry): string => `${plugin.path}\0${plugin.digest ?? ''}`
  /** Pools of plugins a reload replaced or refused: they finish their calls, then stop. */
  const retired = new Set<PluginPool>()
  let closed = false
  /** Cleared when chrt could not put a worker under SCHED_BATCH: then none is tried again. */
  let batchAllowed = true

  const refuse = (vetted: PluginEntry, reason: string): void => {
    // A pool outlives reloads that left its files alone, so the entry it was made for may be
    // from an older catalog: refuse the one the current catalog holds for the same files.
    const plugin = state.catalog.plugins.find((entry) => filesKey(entry) === filesKey(vetted)) ?? vetted
    if (plugin.status === 'refused') return
    plugin.status = 'refused'
    plugin.reason = reason
    if (plugin.name !== undefined && state.catalog.byName.get(plugin.name) === plugin) {
      state.catalog.byName.delete(plugin.name)
      state.catalog.refusedByName.set(plugin.name, plugin)
    }
    log.error({ name: plugin.name, folder: plugin.folder, reason }, 'environment plugin refused')
  }

  const poolFor = (plugin: PluginEntry, runtime: Runtime, identity: VerifierIdentity): PluginPool => {
    let byRuntime = pools.get(filesKey(plugin))
    if (byRuntime === undefined) pools.set(filesKey(plugin), byRuntime = new Map())
    let pool = byRuntime.get(runtime)
    if (pool !== undefined) return pool
    if (runtime === 'python' && python === undefined) {
      throw new VerificationError('ARB_PLUGIN_RUNTIME_UNAVAILABLE', identity, `plugin "${plugin.name}" needs Python, which is unavailable: ${pythonProblem ?? 'not resolved'}`)
    }
    // Nothing of a plugin runs unless its files still match what was vetted. Workers starting
    // at the same moment share one re-check instead of each hashing the folder.
    let checking: Promise<{ code: ErrorCode, message: string } | undefined> | undefined
    const recheck = async (): Promise<{ code: ErrorCode, message: string } | undefined> => {
      const now = await digestFolder(plugin.path)
      if (now === plugin.digest) return undefined
      const reason = `files changed since they were vetted (vetted ${plugin.digest ?? 'none'}, now ${now})`
      refuse(plugin, reason)
      return { code: 'ARB_PLUGIN_NOT_VETTED', message: `plugin "${plugin.name}" is refused: ${reason}` }
    }
    pool = new PluginPool({
      label: `${plugin.name ?? plugin.folder} (${runtime})`,
      spawn: spawnSpec(runtime, { python: python?.executable, pluginPath: plugin.path, memoryMb: options.memoryMb, env }),
      size: options.workers,
      maxCalls: options.maxCalls,
      log,
      onEvent: (event) => { telemetry({ type: POOL_EVENTS[event], plugin: plugin.name ?? plugin.folder }) },
      onSpawn: (pid) => {
        if (!batchAllowed) return
        void batchScheduling(pid).then((outcome) => {
          if (outcome !== 'refused') return
          batchAllowed = false // not tried again for every worker start
          log.info({ plugin: plugin.name, pid }, 'plugin workers keep their scheduling policy: chrt is missing or may not set SCHED_BATCH')
        })
      },
      beforeStart: async () => await (checking ??= recheck().finally(() => { checking = undefined }))
    })
    byRuntime.set(runtime, pool)
    return pool
  }

  // What a call of one ref on one vetted plugin needs (parsed ref, module file, pool, the
  // provenance of its answers) is worked out once, and kept in the state once a call through it
  // succeeded, as module resolutions are once they succeeded: a client sending ever new refs or
  // module names that fail grows nothing.
  const prepare = async (plugin: PluginEntry, ref: string, identity: VerifierIdentity): Promise<Target> => {
    const parsed = parsePluginRef(ref)
    if (parsed === undefined) throw new VerificationError('ARB_PLUGIN_MODULE_NOT_FOUND', identity, `ref "${ref}" is not module:callable with a dotted module path and a plain identifier`)
    const resolution = await resolveCached(plugin, parsed.module)
    if (!resolution.ok) throw new VerificationError('ARB_PLUGIN_MODULE_NOT_FOUND', identity, `plugin "${plugin.name}": ${resolution.reason}`)
    const { runtime, file } = resolution.value
    return {
      identity,
      module: parsed.module,
      callable: parsed.callable,
      file,
      pool: poolFor(plugin, runtime, identity),
      provenance: Object.freeze({ kind: 'plugin', ref, plugin: plugin.name, version: plugin.version, digest: plugin.digest, runtime })
    }
  }

  const resolveCached = async (plugin: PluginEntry, module: string): Promise<Resolution> => {
    const key = `${plugin.path}\0${module}`
    let resolution = state.resolutions.get(key)
    if (resolution === undefined) {
      const resolutions = state.resolutions
      resolution = resolveModule(plugin.path, module, plugin.runtime)
      resolutions.set(key, resolution)
      resolution.then((found) => { if (!found.ok) resolutions.delete(key) }, () => resolutions.delete(key))
    }
    return await resolution
  }

  const idleMs = options.idleS * 1000
  const reaper = setInterval(() => {
    for (const byRuntime of pools.values()) for (const pool of byRuntime.values()) pool.reap(idleMs)
    for (const pool of retired) {
      pool.reap(0)
      if (pool.all.size === 0 && pool.queued === 0) retired.delete(pool)
    }
  }, Math.min(Math.max(idleMs / 2, 100), 30_000))
  reaper.unref()

  const handler: KindHandler = {
    kind: 'plugin',
    defaultTimeoutS: DEFAULT_PLUGIN_TIMEOUT_S,

    async verify (context: VerificationContext): Promise<VerificationOutcome> {
      const { manifest } = context
      const ref = manifest.verifier.ref
      if (closed) throw failure(ref, 'ARB_SHUTTING_DOWN', 'the plugin workers are shutting down')
      const name = manifest.name
      if (typeof name !== 'string' || name === '') throw failure(ref, 'ARB_PLUGIN_NOT_FOUND', 'manifest.name is required: it selects the environment plugin')
      const { catalog } = state
      const plugin = catalog.byName.get(name)
      if (plugin === undefined) {
        const refused = catalog.refusedByName.get(name)
        if (refused !== undefined) throw failure(ref, 'ARB_PLUGIN_NOT_VETTED', `plugin "${name}" is refused: ${refused.reason ?? 'it failed the digest gate'}`)
        const known = [...catalog.byName.keys()].sort()
        throw failure(ref, 'ARB_PLUGIN_NOT_FOUND', `no environment plugin named "${name}" is installed (installed: ${known.length === 0 ? 'none' : known.join(', ')})`)
      }
      if (manifest.version !== undefined && manifest.version !== plugin.version) {
        throw failure(ref, 'ARB_PLUGIN_VERSION_MISMATCH', `manifest.version is ${manifest.version}, the installed plugin "${name}" is ${plugin.version}`)
      }
      if (manifest.digest !== undefined && manifest.digest !== plugin.digest) {
        throw failure(ref, 'ARB_PLUGIN_DIGEST_MISMATCH', `manifest.digest is ${manifest.digest}, the installed plugin "${name}" is ${plugin.digest}`)
      }
      const targets = state.targets
      const known = targets.get(plugin)?.get(ref)
      const target = known ?? await prepare(plugin, ref, { kind: 'plugin', ref })
      const verdict = await target.pool.call({
        identity: target.identity,
        module: target.module,
        file: target.file,
        callable: target.callable,
        task: context.task,
        trajectory: context.trajectory,
        timeoutMs: context.timeoutMs,
        requestId: context.requestId
      })
      if (known === undefined) {
        let byRef = targets.get(plugin)
        if (byRef === undefined) targets.set(plugin, byRef = new Map())
        byRef.set(ref, target)
      }
      return toVerifierResult(verdict, target.provenance, manifest.verifier.pass_threshold)
    },

    describe () {
      return {
        plugins: state.catalog.plugins.map(describeEntry),
        python: python === undefined ? { available: false, reason: pythonProblem } : { available: true, executable: python.executable, version: python.version },
        node: { available: true, version: process.versions.node },
        lock: options.lockFile === undefined ? null : options.lockFile,
        workersPerPlugin: options.workers
      }
    },

    notReadyReason () {
      // Python missing only matters when a vetted plugin needs it (or might: no runtime declared
      // and none inferred from its manifest's ref); a Node-only deployment needs no Python.
      if (python !== undefined) return undefined
      const needing = state.catalog.plugins
        .filter((p) => p.status === 'vetted' && (p.runtime === 'python' || p.runtime === undefined))
        .map((p) => p.name)
      if (needing.length === 0) return undefined
      return `python runtime unavailable (${pythonProblem ?? 'not resolved'}), needed by plugin(s) ${needing.join(', ')}`
    },

    async reload () {
      // All or nothing: a lock file or plugins folder that became unusable throws here and the
      // current catalog stays in force.
      const next = await load()
      state = next
      // Pools of plugins whose folder or digest is no longer vetted finish their calls and stop;
      // the rest carry on with their warm workers.
      const keep = new Set(next.catalog.plugins.filter((p) => p.status === 'vetted').map(filesKey))
      for (const [key, byRuntime] of pools) {
        if (keep.has(key)) continue
        pools.delete(key)
        for (const pool of byRuntime.values()) {
          retired.add(pool)
          pool.retire()
        }
      }
    },

    async close () {
      closed = true
      clearInterval(reaper)
      const all = [...[...pools.values()].flatMap((byRuntime) => [...byRuntime.values()]), ...retired]
      pools.clear()
      retired.clear()
      await Promise.all(all.map(async (pool) => await pool.close()))
    }
  }
  return handler
}

