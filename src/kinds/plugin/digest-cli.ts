// Prints the content digest of environment plugin folders, so authors can pin them.
//
//   npm run digest -- examples/plugins/arithmetic        -> sha256:…
//   npm run digest -- --lock examples/plugins/*          -> a lock file (JSON) for those plugins
//
// Without a build: python3 src/kinds/plugin/runtime/digest.py <folder> (the same rule).
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readManifest } from './catalog.js'
import { digestFolder } from './digest.js'

export async function main (argv: string[], write: (text: string) => void): Promise<number> {
  const lock = argv[0] === '--lock'
  const folders = lock ? argv.slice(1) : argv
  if (folders.length === 0) {
    write('usage: digest [--lock] <plugin folder>...\n')
    return 2
  }
  if (!lock) {
    for (const folder of folders) write(folders.length === 1 ? `${await digestFolder(folder)}\n` : `${await digestFolder(folder)}  ${folder}\n`)
    return 0
  }
  const pins: Record<string, string> = {}
  for (const folder of folders) {
    // The server's own manifest check: a folder it would refuse is not pinned.
    const read = await readManifest(folder)
    if (!read.ok) continue // not an environment plugin (a README, a file, a bad manifest)
    pins[`${read.manifest.name}@${read.manifest.version}`] = await digestFolder(folder)
  }
  write(`${JSON.stringify(pins, null, 2)}\n`)
  return 0
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2), (text) => process.stdout.write(text)).then((code) => { process.exitCode = code }, (error: Error) => {
    process.stderr.write(`digest: ${error.message}\n`)
    process.exitCode = 1
  })
}
