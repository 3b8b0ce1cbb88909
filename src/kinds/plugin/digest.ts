// Content digest of an environment plugin folder. The exact rule (also in the README, and
// implemented a second time in runtime/digest.py, which a test keeps in agreement):
//
//   1. Walk the folder recursively without following symlinks. Skip, wherever they appear:
//      directories named `__pycache__`, a `.cache` directory directly inside a `node_modules`
//      directory, and files whose name ends in `.pyc` or `.pyo`. Empty directories and special
//      files (sockets, FIFOs, devices) contribute nothing.
//   2. Each remaining entry is a regular file or a symlink, named by its path relative to the
//      folder with `/` separators, encoded as UTF-8. Sort entries by those bytes.
//   3. SHA-256 over, for each entry in order:
//        type ("f" for a file, "l" for a symlink) + " " + path + NUL + decimal byte length of
//        the content + NUL + content
//      where content is the file's bytes, or for a symlink the link text (never its target).
//   4. The digest is "sha256:" + lowercase hex.
//
// manifest.json is a file like any other, so a version bump changes the digest.
import { createHash } from 'node:crypto'
import { lstat, readdir, readFile, readlink } from 'node:fs/promises'
import { join } from 'node:path'

const DIGEST_PREFIX = 'sha256:'

interface Entry { type: 'f' | 'l', path: Buffer, absolute: string }

/** Whether a relative path (with `/` separators) is a cache that the digest ignores. */
export function isExcluded (relative: string, isDirectory: boolean): boolean {
  const parts = relative.split('/')
  const name = parts[parts.length - 1]
  if (isDirectory) {
    if (name === '__pycache__') return true
    if (name === '.cache' && parts.length >= 2 && parts[parts.length - 2] === 'node_modules') return true
    return false
  }
  return name.endsWith('.pyc') || name.endsWith('.pyo')
}

async function collect (root: string, relative: string, into: Entry[]): Promise<void> {
  const absolute = relative === '' ? root : join(root, relative)
  const names = await readdir(absolute)
  for (const name of names) {
    const childRelative = relative === '' ? name : `${relative}/${name}`
    const childAbsolute = join(root, childRelative)
    const info = await lstat(childAbsolute)
    if (info.isDirectory()) {
      if (!isExcluded(childRelative, true)) await collect(root, childRelative, into)
    } else if (info.isFile()) {
      if (!isExcluded(childRelative, false)) into.push({ type: 'f', path: Buffer.from(childRelative, 'utf8'), absolute: childAbsolute })
    } else if (info.isSymbolicLink()) {
      if (!isExcluded(childRelative, false)) into.push({ type: 'l', path: Buffer.from(childRelative, 'utf8'), absolute: childAbsolute })
    }
  }
}

/** The `sha256:<hex>` digest of a plugin folder under the rule above. */
export async function digestFolder (folder: string): Promise<string> {
  const entries: Entry[] = []
  await collect(folder, '', entries)
  entries.sort((a, b) => Buffer.compare(a.path, b.path))
  const hash = createHash('sha256')
  for (const entry of entries) {
    const content = entry.type === 'f' ? await readFile(entry.absolute) : Buffer.from(await readlink(entry.absolute), 'utf8')
    hash.update(`${entry.type} `)
    hash.update(entry.path)
    hash.update(`\0${content.length}\0`)
    hash.update(content)
  }
  return DIGEST_PREFIX + hash.digest('hex')
}
