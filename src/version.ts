// Name and version from package.json, read once; used in GET /, user-agent and /v1/verifiers.
import { readFileSync } from 'node:fs'

const PACKAGE_JSON = new URL(import.meta.url.includes('/dist/') ? '../../package.json' : '../package.json', import.meta.url)
const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { name: string, version: string }

export const NAME = pkg.name
export const VERSION = pkg.version
export const USER_AGENT = `${pkg.name}/${pkg.version}`
