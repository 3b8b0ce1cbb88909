// Resolves the `module` of a `module:callable` ref to a file inside the plugin folder, and
// nowhere else. The dotted path maps to `a/b.py`, `a/b/__init__.py`, `a/b.mjs` or `a/b.js`
// (tried in that order, limited to the plugin's runtime when its manifest names one). Every
// segment must be a plain identifier, so `..`, `/` and absolute paths cannot be spelled, and the
// real path of the file (symlinks followed) must still lie inside the real plugin folder.
import { realpath, stat } from 'node:fs/promises'
import { join, sep } from 'node:path'
import type { Runtime } from './catalog.js'

const SEGMENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/

export interface ResolvedModule {
  runtime: Runtime
  /** Absolute real path of the module file. */
  file: string
  /** The dotted module name (Python imports it by this name). */
  module: string
}

export type Resolution = { ok: true, value: ResolvedModule } | { ok: false, reason: string }

const CANDIDATES: Array<{ suffix: string, runtime: Runtime }> = [
  { suffix: '.py', runtime: 'python' },
  { suffix: '/__init__.py', runtime: 'python' },
  { suffix: '.mjs', runtime: 'node' },
  { suffix: '.js', runtime: 'node' }
]

export async function resolveModule (pluginPath: string, module: string, runtime?: Runtime): Promise<Resolution> {
  const segments = module.split('.')
  if (module === '' || !segments.every((segment) => SEGMENT.test(segment))) {
    return { ok: false, reason: `module "${module}" must be a dotted path of plain identifiers` }
  }
  let root: string
  try {
    root = await realpath(pluginPath)
  } catch (error) {
    return { ok: false, reason: `the plugin folder is gone: ${(error as Error).message}` }
  }
  const base = join(root, ...segments)
  for (const candidate of CANDIDATES) {
    if (runtime !== undefined && candidate.runtime !== runtime) continue
    const path = base + candidate.suffix.replace('/', sep)
    let real: string
    try {
      real = await realpath(path)
      if (!(await stat(real)).isFile()) continue
    } catch {
      continue
    }
    if (!real.startsWith(root + sep)) {
      return { ok: false, reason: `module "${module}" resolves outside the plugin folder` }
    }
    return { ok: true, value: { runtime: candidate.runtime, file: real, module } }
  }
  const tried = CANDIDATES.filter((c) => runtime === undefined || c.runtime === runtime).map((c) => segments.join('/') + c.suffix)
  return { ok: false, reason: `module "${module}" is not a file in the plugin folder (tried ${tried.join(', ')})` }
}
