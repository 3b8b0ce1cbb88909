// The installed environment plugins: one folder each under the plugins folder, with a
// manifest.json of `kind: "environment"`. Scanning computes each plugin's digest and applies the
// lock gate; a folder that is not a valid plugin, or that fails the gate, is kept in the catalog
// as refused with its reason (reported by GET /v1/verifiers and the log), and nothing of it runs.
import { readdir, readFile, stat } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import { ConfigError } from '../../errors.js'
import { digestFolder } from './digest.js'

export type Runtime = 'python' | 'node'
export const RUNTIMES: readonly Runtime[] = ['python', 'node']

export interface PluginEntry {
  /** The folder's own name under the plugins folder. */
  folder: string
  /** Absolute path of the plugin folder. */
  path: string
  name?: string
  version?: string
  runtime?: Runtime
  digest?: string
  verifier?: { kind: string, ref: string }
  status: 'vetted' | 'refused'
  reason?: string
}

export interface Catalog {
  plugins: PluginEntry[]
  /** Vetted plugins by manifest name. */
  byName: Map<string, PluginEntry>
  /** Refused plugins by manifest name, where the manifest had one. */
  refusedByName: Map<string, PluginEntry>
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/** Lock file: a JSON object mapping "name@version" to "sha256:<64 hex>". */
export async function readLock (file: string): Promise<Map<string, string>> {
  let parsed: unknown
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'))
  } catch (error) {
    throw new ConfigError('ARBITER_PLUGINS_LOCK', `cannot read the plugin lock file ${file}: ${(error as Error).message}`)
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError('ARBITER_PLUGINS_LOCK', `${file} must be a JSON object of "name@version": "sha256:<hex>"`)
  }
  const pins = new Map<string, string>()
  for (const [key, value] of Object.entries(parsed)) {
    if (!/^[^@\s]+@[^@\s]+$/.test(key) || typeof value !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(value)) {
      throw new ConfigError('ARBITER_PLUGINS_LOCK', `${file}: entry ${JSON.stringify(key)} must be "name@version": "sha256:<64 lowercase hex>"`)
    }
    pins.set(key, value)
  }
  return pins
}

function manifestProblem (manifest: unknown): string | undefined {
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) return 'manifest.json is not a JSON object'
  const m = manifest as Record<string, unknown>
  if (m.kind !== 'environment') return `manifest kind is ${JSON.stringify(m.kind)}, not "environment"`
  if (typeof m.name !== 'string' || !NAME.test(m.name)) return 'manifest name must be a string of letters, digits, ".", "_" or "-"'
  if (typeof m.version !== 'string' || m.version.trim() === '') return 'manifest version must be a non-empty string'
  if (m.runtime !== undefined && !(RUNTIMES as readonly unknown[]).includes(m.runtime)) return `manifest runtime must be "python" or "node", got ${JSON.stringify(m.runtime)}`
  if (m.verifier !== undefined) {
    const v = m.verifier as Record<string, unknown> | null
    if (v === null || typeof v !== 'object' || typeof v.kind !== 'string' || typeof v.ref !== 'string') return 'manifest verifier must be an object with string kind and ref'
  }
  return undefined
}

export interface PluginManifest {
  name: string
  version: string
  runtime?: Runtime
  verifier?: { kind: string, ref: string }
}

export type ManifestRead = { ok: true, manifest: PluginManifest } | { ok: false, reason: string, name?: string }

/** A plugin folder's manifest.json, checked; or why the folder is not an environment plugin. */
export async function readManifest (path: string): Promise<ManifestRead> {
  let raw: Record<string, unknown>
  try {
    raw = JSON.parse(await readFile(join(path, 'manifest.json'), 'utf8'))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return { ok: false, reason: code === 'ENOENT' ? 'no manifest.json' : `manifest.json is unreadable: ${(error as Error).message}` }
  }
  const problem = manifestProblem(raw)
  if (problem !== undefined) return typeof raw?.name === 'string' ? { ok: false, reason: problem, name: raw.name } : { ok: false, reason: problem }
  const manifest: PluginManifest = { name: raw.name as string, version: raw.version as string }
  if (raw.runtime !== undefined) manifest.runtime = raw.runtime as Runtime
  if (raw.verifier !== undefined) {
    const v = raw.verifier as { kind: string, ref: string }
    manifest.verifier = { kind: v.kind, ref: v.ref }
  }
  return { ok: true, manifest }
}

async function scanOne (root: string, folder: string, pins: Map<string, string> | undefined): Promise<PluginEntry> {
  const path = join(root, folder)
  const entry: PluginEntry = { folder, path, status: 'refused' }
  const read = await readManifest(path)
  if (!read.ok) {
    entry.reason = read.reason
    if (read.name !== undefined) entry.name = read.name
    return entry
  }
  const { manifest } = read
  entry.name = manifest.name
  entry.version = manifest.version
  if (manifest.runtime !== undefined) entry.runtime = manifest.runtime
  if (manifest.verifier !== undefined) entry.verifier = manifest.verifier
  try {
    entry.digest = await digestFolder(path)
  } catch (error) {
    entry.reason = `cannot compute the digest: ${(error as Error).message}`
    return entry
  }
  if (pins !== undefined) {
    const key = `${entry.name}@${entry.version}`
    const pinned = pins.get(key)
    if (pinned === undefined) {
      entry.reason = `${key} is not pinned in the lock file`
      return entry
    }
    if (pinned !== entry.digest) {
      entry.reason = `files do not match the lock file: ${key} is pinned to ${pinned}, the folder is ${entry.digest}`
      return entry
    }
  }
  entry.status = 'vetted'
  return entry
}

/** Scans the plugins folder. Throws a ConfigError when the folder or the lock file is unusable. */
export async function scanPlugins (pluginsDir: string, lockFile?: string): Promise<Catalog> {
  const root = resolve(pluginsDir)
  try {
    if (!(await stat(root)).isDirectory()) throw new Error('not a directory')
  } catch (error) {
    throw new ConfigError('ARBITER_PLUGINS_DIR', `${root} is not a readable folder: ${(error as Error).message}`)
  }
  const pins = lockFile === undefined ? undefined : await readLock(lockFile)
  const folders: string[] = []
  for (const dirent of await readdir(root, { withFileTypes: true })) {
    if (dirent.name.startsWith('.')) continue
    if (dirent.isDirectory()) folders.push(dirent.name)
    else if (dirent.isSymbolicLink() && (await stat(join(root, dirent.name)).catch(() => undefined))?.isDirectory() === true) folders.push(dirent.name)
  }
  folders.sort()
  const plugins = await Promise.all(folders.map(async (folder) => await scanOne(root, folder, pins)))
  // Two folders claiming one name: a request could not say which it means, so neither runs.
  const byFolderName = new Map<string, PluginEntry[]>()
  for (const plugin of plugins) {
    if (plugin.name === undefined || plugin.digest === undefined) continue
    byFolderName.set(plugin.name, [...(byFolderName.get(plugin.name) ?? []), plugin])
  }
  for (const [name, claimants] of byFolderName) {
    if (claimants.length < 2) continue
    for (const plugin of claimants) {
      plugin.status = 'refused'
      plugin.reason = `the name "${name}" is claimed by several folders (${claimants.map((p) => p.folder).join(', ')})`
    }
  }
  const byName = new Map<string, PluginEntry>()
  const refusedByName = new Map<string, PluginEntry>()
  for (const plugin of plugins) {
    if (plugin.name === undefined) continue
    if (plugin.status === 'vetted') byName.set(plugin.name, plugin)
    else refusedByName.set(plugin.name, plugin)
  }
  return { plugins, byName, refusedByName }
}

export function describeEntry (plugin: PluginEntry): Record<string, unknown> {
  const out: Record<string, unknown> = { folder: basename(plugin.path) }
  if (plugin.name !== undefined) out.name = plugin.name
  if (plugin.version !== undefined) out.version = plugin.version
  if (plugin.runtime !== undefined) out.runtime = plugin.runtime
  if (plugin.digest !== undefined) out.digest = plugin.digest
  if (plugin.verifier !== undefined) out.verifier = plugin.verifier
  out.status = plugin.status
  if (plugin.reason !== undefined) out.reason = plugin.reason
  return out
}
