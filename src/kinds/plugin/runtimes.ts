// Where the worker runtimes live and how a worker is started: the interpreter, its arguments,
// and the scrubbed environment it gets.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Runtime } from './catalog.js'
import type { SpawnSpec } from './pool.js'

/**
 * The folder holding worker.py and worker.mjs. They are not TypeScript, so tsc does not copy
 * them to dist/: from dist/src/kinds/plugin/ this resolves back to the source tree's
 * src/kinds/plugin/runtime/ (the image must ship that folder next to dist/).
 */
export const RUNTIME_DIR = ((): string => {
  const beside = fileURLToPath(new URL('./runtime/', import.meta.url))
  if (existsSync(`${beside}worker.py`)) return beside
  return fileURLToPath(new URL('../../../../src/kinds/plugin/runtime/', import.meta.url))
})()

/** Variables a worker may see; everything else (ARBITER_*, the judge key, tokens) is dropped. */
const PASSED_THROUGH = /^(PATH|HOME|USER|LOGNAME|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|TEMP|TMP|SYSTEMROOT)$/

export function scrubbedEnv (source: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(source)) {
    if (value !== undefined && PASSED_THROUGH.test(name)) env[name] = value
  }
  env.PYTHONDONTWRITEBYTECODE = '1'
  env.PYTHONIOENCODING = 'utf-8'
  return env
}

export interface PythonRuntime {
  executable: string
  version: string
}

const resolved = new Map<string, Promise<PythonRuntime>>()

/**
 * Resolves the Python interpreter once per process, to the binary itself (sys.executable), so
 * that a version-manager shim on PATH is paid for once and not on every worker start (nor on
 * every app a test suite builds).
 */
export async function resolvePython (command: string): Promise<PythonRuntime> {
  let found = resolved.get(command)
  if (found === undefined) {
    found = runPython(command)
    resolved.set(command, found)
    found.catch(() => resolved.delete(command)) // a failure is retried by the next caller
  }
  return await found
}

async function runPython (command: string): Promise<PythonRuntime> {
  return await new Promise((resolve, reject) => {
    execFile(command, ['-c', 'import sys; print(sys.executable); print("%d.%d.%d" % sys.version_info[:3])'],
      { timeout: 15_000, env: scrubbedEnv(process.env) }, (error, stdout) => {
        if (error !== null) {
          reject(new Error(`cannot run ${command}: ${error.message.split('\n')[0]}`))
          return
        }
        const [executable, version] = stdout.trim().split('\n')
        const [major, minor] = version.split('.').map(Number)
        if (major !== 3 || minor < 8) {
          reject(new Error(`${command} is Python ${version}; plugins need Python 3.8 or later`))
          return
        }
        resolve({ executable: executable === '' ? command : executable, version })
      })
  })
}

/**
 * util-linux's setpriv (Debian: essential) sets the parent-death signal before exec'ing the
 * worker, so a worker dies with the server even when the server is SIGKILLed while the plugin
 * is stuck in a loop (a Node worker cannot set it itself; worker.py also sets it via prctl).
 */
export const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path))

/** util-linux's chrt (Debian: essential), for batchScheduling. */
export const CHRT = ['/usr/bin/chrt', '/bin/chrt'].find((path) => existsSync(path)) ?? null

/**
 * Puts a started worker, all its threads and whatever it starts later, under SCHED_BATCH: the
 * same share of the CPU, but a worker woken by a call does not preempt the server's event loop
 * on wakeup, and every request goes through that loop. On 2 cores, a trivial Python plugin at 50
 * connections: about 7% more req/s. Best effort: 'refused' when there is no chrt or it may not
 * change the policy (the worker runs as it is), 'gone' when the process exited first.
 */
export async function batchScheduling (pid: number, chrt: string | null = CHRT): Promise<'set' | 'refused' | 'gone'> {
  if (chrt === null) return 'refused'
  const set = await new Promise<boolean>((resolve) => {
    try {
      execFile(chrt, ['--all-tasks', '--batch', '--pid', '0', String(pid)], { timeout: 5_000 }, (error) => { resolve(error === null) })
    } catch {
      resolve(false) // spawn itself failed (out of memory, too many processes)
    }
  })
  if (set) return 'set'
  try {
    process.kill(pid, 0)
    return 'refused'
  } catch {
    return 'gone'
  }
}

export function spawnSpec (runtime: Runtime, options: { python?: string, pluginPath: string, memoryMb: number, env: Record<string, string>, setpriv?: string | null }): SpawnSpec {
  const command = runtime === 'python' ? options.python ?? 'python3' : process.execPath
  const args = runtime === 'python'
    ? ['-B', `${RUNTIME_DIR}worker.py`, options.pluginPath, String(options.memoryMb)]
    : [`--max-old-space-size=${options.memoryMb}`, `${RUNTIME_DIR}worker.mjs`, options.pluginPath]
  const setpriv = options.setpriv === undefined ? SETPRIV : options.setpriv ?? undefined
  if (setpriv !== undefined) return { command: setpriv, args: ['--pdeathsig', 'KILL', '--', command, ...args], cwd: options.pluginPath, env: options.env }
  return { command, args, cwd: options.pluginPath, env: options.env }
}
