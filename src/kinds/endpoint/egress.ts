// The egress guard against server-side request forgery. A task's manifest names the URL
// Arbiter will POST to, so the URL is untrusted input. Checked twice:
//   1. the parsed host, before anything is sent (Node turns `http://2130706433/` and
//      `http://0x7f.1/` into 127.0.0.1 and skips DNS for IP literals, so this is the only check
//      those get);
//   2. every address a host name resolves to, inside the socket's `lookup`, so a name that
//      resolves (or re-resolves, DNS rebinding) to a metadata address is refused before connect.
// Link-local and metadata, unspecified, multicast and broadcast addresses are always refused.
// Loopback and private ranges are allowed by default, since internal scorers live there;
// ARBITER_ENDPOINT_ALLOW (hosts, *.suffix hosts, origins, IPs, CIDRs) restricts to what it names.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { BlockList, isIP } from 'node:net'
import { ConfigError } from '../../errors.js'

export const EGRESS_DENIED = 'ARB_EGRESS_DENIED'
const MAX_REMEMBERED_ORIGINS = 4096

const ALWAYS_DENIED: Array<[string, number, 'ipv4' | 'ipv6', string]> = [
  ['169.254.0.0', 16, 'ipv4', 'link-local / cloud metadata'],
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['255.255.255.255', 32, 'ipv4', 'broadcast'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fd00:ec2::254', 128, 'ipv6', 'cloud metadata'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['ff00::', 8, 'ipv6', 'multicast']
]

function family (address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4'
}

function stripBrackets (host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

export type LookupFunction = (hostname: string, options: LookupOptions, callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => void

export class EgressError extends Error {
  readonly code = EGRESS_DENIED
  constructor (message: string) {
    super(message)
    this.name = 'EgressError'
  }
}

export class EgressGuard {
  readonly #denied = new BlockList()
  readonly #deniedReasons: Array<{ list: BlockList, reason: string }> = []
  readonly #allowedNets = new BlockList()
  readonly #allowedHosts = new Set<string>()
  readonly #allowedSuffixes: string[] = []
  readonly #allowedOrigins = new Set<string>()
  /** The hosts of the allowed origins, for the check at connect time (which sees no port). */
  readonly #allowedOriginHosts = new Set<string>()
  readonly #verdicts = new Map<string, string | undefined>()
  readonly #hasAllowlist: boolean
  readonly #hasAllowedNets: boolean

  constructor (allow: string[] = []) {
    for (const [network, prefix, type, reason] of ALWAYS_DENIED) {
      this.#denied.addSubnet(network, prefix, type)
      const single = new BlockList()
      single.addSubnet(network, prefix, type)
      this.#deniedReasons.push({ list: single, reason })
    }
    let nets = 0
    for (const entry of allow) {
      const value = entry.trim().toLowerCase()
      if (value.includes('://')) {
        if (!URL.canParse(value)) throw new ConfigError('ARBITER_ENDPOINT_ALLOW', `"${entry}" is not a valid origin`)
        const origin = new URL(value)
        this.#allowedOrigins.add(origin.origin)
        this.#allowedOriginHosts.add(origin.hostname)
      } else if (value.includes('/')) {
        const [network, bits] = value.split('/')
        const prefix = Number(bits)
        const type = family(network)
        if (isIP(network) === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (type === 'ipv4' ? 32 : 128)) {
          throw new ConfigError('ARBITER_ENDPOINT_ALLOW', `"${entry}" is not a valid CIDR`)
        }
        this.#allowedNets.addSubnet(network, prefix, type)
        nets++
      } else if (isIP(stripBrackets(value)) !== 0) {
        const address = stripBrackets(value)
        this.#allowedNets.addAddress(address, family(address))
        nets++
      } else if (value.startsWith('*.')) {
        this.#allowedSuffixes.push(value.slice(1))
      } else if (value !== '') {
        this.#allowedHosts.add(value)
      }
    }
    this.#hasAllowedNets = nets > 0
    this.#hasAllowlist = allow.some((entry) => entry.trim() !== '')
  }

  /**
   * Why this URL may not be called, or undefined. Nothing is sent when this answers. The verdict
   * depends only on the origin, so it is remembered: a training run calls a handful of origins
   * thousands of times, and each BlockList check allocates.
   */
  urlProblem (url: URL): string | undefined {
    const origin = url.origin
    if (this.#verdicts.has(origin)) return this.#verdicts.get(origin)
    const problem = this.#urlProblem(url)
    if (this.#verdicts.size >= MAX_REMEMBERED_ORIGINS) this.#verdicts.clear()
    this.#verdicts.set(origin, problem)
    return problem
  }

  #urlProblem (url: URL): string | undefined {
    const host = stripBrackets(url.hostname)
    if (isIP(host) !== 0) {
      const denied = this.#deniedReason(host)
      if (denied !== undefined) return `${url.host} is a ${denied} address, which endpoints may never use`
      if (!this.#hasAllowlist || this.#admittedByName(url) || this.#allowedNets.check(host, family(host))) return undefined
      return `${url.origin} is not in ARBITER_ENDPOINT_ALLOW`
    }
    if (!this.#hasAllowlist || this.#admittedByName(url) || this.#hasAllowedNets) return undefined
    return `${url.origin} is not in ARBITER_ENDPOINT_ALLOW`
  }

  /** Why a host name may not connect to this resolved address, or undefined. */
  addressProblem (hostname: string, address: string): string | undefined {
    const denied = this.#deniedReason(address)
    if (denied !== undefined) return `${hostname} resolved to ${address}, a ${denied} address, which endpoints may never use`
    // The URL check already held the origin to its exact scheme and port; here a host named by
    // an origin entry is as good as a host entry.
    if (!this.#hasAllowlist || this.#hostAdmitted(hostname.toLowerCase(), true) || this.#allowedNets.check(address, family(address))) return undefined
    return `${hostname} resolved to ${address}, which is outside ARBITER_ENDPOINT_ALLOW`
  }

  /** A socket `lookup` that refuses a name resolving to any address the guard refuses. */
  lookup (base: LookupFunction = dnsLookup as unknown as LookupFunction): LookupFunction {
    return (hostname, options, callback) => {
      const opts: LookupOptions = typeof options === 'object' && options !== null ? options : { family: options as unknown as number }
      base(hostname, { ...opts, all: true }, (error, addresses) => {
        if (error !== null) { callback(error, ''); return }
        const list = addresses as LookupAddress[]
        for (const { address } of list) {
          const problem = this.addressProblem(hostname, address)
          if (problem !== undefined) { callback(new EgressError(problem), ''); return }
        }
        if (opts.all === true) { callback(null, list); return }
        const first = list[0]
        if (first === undefined) { callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), ''); return }
        callback(null, first.address, first.family)
      })
    }
  }

  describe (): string[] | string {
    if (!this.#hasAllowlist) return 'any address except link-local, cloud metadata, unspecified, multicast and broadcast'
    return [...this.#allowedOrigins, ...this.#allowedHosts, ...this.#allowedSuffixes.map((suffix) => `*${suffix}`), ...this.#allowedNets.rules]
  }

  #deniedReason (address: string): string | undefined {
    const type = family(address)
    if (!this.#denied.check(address, type)) return undefined
    return this.#deniedReasons.find(({ list }) => list.check(address, type))?.reason ?? 'forbidden'
  }

  #admittedByName (url: URL): boolean {
    return this.#allowedOrigins.has(url.origin) || this.#hostAdmitted(url.hostname.toLowerCase(), false)
  }

  #hostAdmitted (hostname: string, viaOrigins: boolean): boolean {
    if (this.#allowedHosts.has(hostname)) return true
    if (this.#allowedSuffixes.some((suffix) => hostname.endsWith(suffix))) return true
    if (viaOrigins && this.#allowedOriginHosts.has(hostname)) return true
    return false
  }
}
