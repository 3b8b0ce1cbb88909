// The rubric store: `<dir>/<owner>/<name>/<version>.(yaml|yml|json|md)`, read whole into an
// immutable snapshot. Requests resolve against the snapshot current when they start; a reload
// builds a new snapshot off to the side and swaps it in only if it is sound, so a half-edited
// tree never serves (see `RubricStore.reload`).
import { readdir, readFile, stat } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { VerificationError } from '../../errors.js'
import type { Log } from '../../registry.js'
import { parseRubricRef } from '../../refs.js'
import { parseRubricFile, RubricFileError, type RubricFile } from './parse.js'
import type { Rubric } from './rubric.js'

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
const VERSION_FILE = /^([1-9][0-9]*)\.(yaml|yml|json|md)$/

export interface InvalidRubric {
  /** Path relative to the store. */
  path: string
  /** owner/name@version when the path gives one. */
  ref?: string
  reason: string
}

type Slot = { ok: true, rubric: Rubric } | { ok: false, invalid: InvalidRubric }

export interface StoreSnapshot {
  dir: string
  loadedAt: string
  /** owner/name → version → rubric or the reason it is invalid. */
  rubrics: Map<string, Map<number, Slot>>
  invalid: InvalidRubric[]
}

async function isDirectory (path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory()
  } catch {
    return false
  }
}

async function entries (path: string): Promise<string[]> {
  return (await readdir(path)).filter((name) => !name.startsWith('.')).sort()
}

/** Reads the whole store. Throws only when the folder itself cannot be read. */
export async function loadSnapshot (dir: string): Promise<StoreSnapshot> {
  const rubrics = new Map<string, Map<number, Slot>>()
  const invalid: InvalidRubric[] = []
  const owners = await entries(dir)
  for (const owner of owners) {
    const ownerPath = join(dir, owner)
    if (!(await isDirectory(ownerPath))) continue // README and the like at the top level
    for (const name of await entries(ownerPath)) {
      const namePath = join(ownerPath, name)
      if (!(await isDirectory(namePath))) continue
      if (!SEGMENT.test(owner) || !SEGMENT.test(name)) {
        invalid.push({ path: relative(dir, namePath), reason: 'owner and name must match [A-Za-z0-9][A-Za-z0-9._-]* to be named by a ref' })
        continue
      }
      const key = `${owner}/${name}`
      const files = new Map<number, RubricFile[]>()
      for (const file of await entries(namePath)) {
        const path = join(namePath, file)
        const match = VERSION_FILE.exec(file)
        if (match === null || !Number.isSafeInteger(Number(match[1]))) {
          invalid.push({ path: relative(dir, path), reason: 'file name must be <version>.(yaml|yml|json|md) with a positive whole version' })
          continue
        }
        let bytes: Buffer
        try {
          bytes = await readFile(path)
        } catch (error) {
          invalid.push({ path: relative(dir, path), ref: `${key}@${match[1]}`, reason: `cannot be read: ${(error as Error).message}` })
          continue
        }
        const version = Number(match[1])
        const list = files.get(version) ?? []
        list.push({ owner, name, version, extension: match[2] as RubricFile['extension'], path: relative(dir, path), bytes })
        files.set(version, list)
      }
      const versions = new Map<number, Slot>()
      for (const [version, list] of [...files].sort((a, b) => a[0] - b[0])) {
        const ref = `${key}@${version}`
        if (list.length > 1) {
          const reason = `version ${version} has ${list.length} files (${list.map((file) => file.path).join(', ')}); keep one`
          const entry = { path: list[0].path, ref, reason }
          invalid.push(entry)
          versions.set(version, { ok: false, invalid: entry })
          continue
        }
        try {
          versions.set(version, { ok: true, rubric: parseRubricFile(list[0]) })
        } catch (error) {
          /* c8 ignore next -- parseRubricFile only throws RubricFileError; anything else is a bug worth its message */
          const reason = error instanceof RubricFileError ? error.message : `unexpected: ${(error as Error).message}`
          const entry = { path: list[0].path, ref, reason }
          invalid.push(entry)
          versions.set(version, { ok: false, invalid: entry })
        }
      }
      if (versions.size > 0) rubrics.set(key, versions)
    }
  }
  return { dir, loadedAt: new Date().toISOString(), rubrics, invalid }
}

function emptySnapshot (dir: string): StoreSnapshot {
  return { dir, loadedAt: new Date().toISOString(), rubrics: new Map(), invalid: [] }
}

export interface ReloadStatus {
  ok: boolean
  at: string
  /** Why the last reload was refused; the previous snapshot kept serving. */
  reason?: string
}

export class RubricStore {
  readonly dir: string
  readonly #log: Log
  #snapshot: StoreSnapshot
  #storeError: string | undefined
  #lastReload: ReloadStatus | undefined
  #reloading: Promise<void> = Promise.resolve()

  private constructor (dir: string, log: Log) {
    this.dir = dir
    this.#log = log
    this.#snapshot = emptySnapshot(dir)
  }

  /** Loads the store; an unreadable folder leaves it empty and not ready rather than throwing. */
  static async open (dir: string, log: Log): Promise<RubricStore> {
    const store = new RubricStore(dir, log)
    try {
      store.#snapshot = await loadSnapshot(dir)
      store.#storeError = undefined
    } catch (error) {
      store.#storeError = `rubric store ${dir} cannot be read: ${(error as Error).message}`
      log.error({ dir }, store.#storeError)
    }
    store.#logInvalid(store.#snapshot)
    return store
  }

  #logInvalid (snapshot: StoreSnapshot): void {
    for (const entry of snapshot.invalid) this.#log.warn({ rubric: entry }, `invalid rubric ${entry.path}: ${entry.reason}`)
  }

  get snapshot (): StoreSnapshot { return this.#snapshot }
  get storeError (): string | undefined { return this.#storeError }
  get lastReload (): ReloadStatus | undefined { return this.#lastReload }

  /**
   * Re-reads the tree and swaps it in whole. It is refused, and the current snapshot keeps
   * serving, when the folder cannot be read or when a file that is not already invalid in the
   * current snapshot is invalid in the new one (a file caught half-written, a typo just saved).
   * Files that were already invalid stay reported without blocking other changes.
   */
  async reload (): Promise<void> {
    const run = this.#reloading.then(async () => await this.#reloadNow())
    this.#reloading = run.catch(() => {})
    await run
  }

  async #reloadNow (): Promise<void> {
    const at = new Date().toISOString()
    let next: StoreSnapshot
    try {
      next = await loadSnapshot(this.dir)
    } catch (error) {
      const reason = `rubric store ${this.dir} cannot be read: ${(error as Error).message}`
      this.#lastReload = { ok: false, at, reason }
      this.#log.error({ dir: this.dir }, `rubric reload refused, previous rubrics keep serving: ${reason}`)
      return
    }
    const known = new Set(this.#storeError === undefined ? this.#snapshot.invalid.map((entry) => `${entry.path}\n${entry.reason}`) : [])
    const fresh = next.invalid.filter((entry) => !known.has(`${entry.path}\n${entry.reason}`))
    if (fresh.length > 0 && this.#storeError === undefined) {
      const reason = fresh.map((entry) => `${entry.path}: ${entry.reason}`).join('; ')
      this.#lastReload = { ok: false, at, reason }
      this.#log.error({ invalid: fresh }, `rubric reload refused, previous rubrics keep serving: ${reason}`)
      return
    }
    this.#snapshot = next
    this.#storeError = undefined
    this.#lastReload = { ok: true, at }
    this.#logInvalid(next)
    this.#log.info({ rubrics: next.rubrics.size, invalid: next.invalid.length }, 'rubric store reloaded')
  }

  /** The rubric a ref names in the current snapshot, or a 502 naming the ref. */
  resolve (ref: string): Rubric {
    const verifier = { kind: 'rubric', ref }
    const parsed = parseRubricRef(ref)
    if (parsed === undefined) {
      throw new VerificationError('ARB_RUBRIC_NOT_FOUND', verifier, `"${ref}" is not a rubric ref (owner/name or owner/name@N)`)
    }
    const key = `${parsed.owner}/${parsed.name}`
    const versions = this.#snapshot.rubrics.get(key)
    if (versions === undefined) {
      const why = this.#storeError === undefined ? '' : ` (${this.#storeError})`
      throw new VerificationError('ARB_RUBRIC_NOT_FOUND', verifier, `no rubric "${key}" in the rubric store${why}`)
    }
    const version = parsed.version ?? Math.max(...versions.keys())
    const slot = versions.get(version)
    if (slot === undefined) {
      throw new VerificationError('ARB_RUBRIC_NOT_FOUND', verifier,
        `rubric "${key}" has no version ${version} (versions: ${[...versions.keys()].join(', ')})`)
    }
    if (!slot.ok) {
      throw new VerificationError('ARB_RUBRIC_INVALID', verifier, `rubric ${slot.invalid.ref ?? key} is invalid: ${slot.invalid.reason}`,
        { details: { path: slot.invalid.path, reason: slot.invalid.reason } })
    }
    return slot.rubric
  }

  /** For GET /v1/verifiers. */
  describe (): Record<string, unknown> {
    const snapshot = this.#snapshot
    const rubrics = [...snapshot.rubrics].sort(([a], [b]) => a.localeCompare(b)).map(([ref, versions]) => ({
      ref,
      latest: Math.max(...versions.keys()),
      versions: [...versions].map(([version, slot]) => slot.ok
        ? {
            version: slot.rubric.version,
            title: slot.rubric.title,
            format: slot.rubric.format,
            content_hash: slot.rubric.contentHash,
            dimensions: slot.rubric.dimensions.map((dimension) => dimension.name),
            pass_threshold: slot.rubric.passThreshold,
            requires_reference: slot.rubric.requiresReference
          }
        : { version, invalid: slot.invalid.reason })
    }))
    const description: Record<string, unknown> = {
      dir: snapshot.dir,
      loaded_at: snapshot.loadedAt,
      rubrics,
      invalid: snapshot.invalid
    }
    if (this.#storeError !== undefined) description.error = this.#storeError
    if (this.#lastReload !== undefined) description.last_reload = this.#lastReload
    return description
  }
}
