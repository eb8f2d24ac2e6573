// Digital Bazaar's Data Integrity stack against handoffs, both ways (issue 32, item 3).
// Driven by tests/integration/test_interop_js.py: it reads a job (JSON) on stdin and
// writes the results (JSON) on stdout.
//
//   job.verify: [{label, document, purpose, expect}]: verify each document here
//     (purpose "assertionMethod" or "capabilityDelegation"); a result that differs
//     from `expect` is a failure.
//   job.sign: [{label, suite, document, lowS, wantHighS}]: sign each document here
//     with a fresh key of `suite`; `lowS` wraps an ECDSA signer so that it signs low-S
//     (s <= n/2, the portable form); `wantHighS` re-signs until the raw signature is
//     high-S (WebCrypto does not normalise S).
//
// Keys are did:key Multikeys resolved in memory from the DID itself, and every JSON-LD
// context comes from the installed context packages: nothing is fetched. The exit
// status is 1 when any verification differs from its expectation, 2 on a broken job.
import * as didContext from 'did-context';
import * as diContext from '@digitalbazaar/data-integrity-context';
import * as multikeyContext from '@digitalbazaar/multikey-context';
import * as Ed25519Multikey from '@digitalbazaar/ed25519-multikey';
import * as EcdsaMultikey from '@digitalbazaar/ecdsa-multikey';
import * as eddsaJcs2022 from '@digitalbazaar/eddsa-jcs-2022-cryptosuite';
import * as ecdsaJcs2019 from '@digitalbazaar/ecdsa-jcs-2019-cryptosuite';
import {DataIntegrityProof} from '@digitalbazaar/data-integrity';
import jsigs from 'jsonld-signatures';

const {AssertionProofPurpose, ControllerProofPurpose} = jsigs.purposes;
const SUITES = {'eddsa-jcs-2022': eddsaJcs2022, 'ecdsa-jcs-2019': ecdsaJcs2019};
const P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551n;

const CONTEXTS = new Map([
  ...didContext.contexts, ...diContext.contexts, ...multikeyContext.contexts]);

function didDocument(did) {
  const multibase = did.slice('did:key:'.length);
  const vm = {id: `${did}#${multibase}`, type: 'Multikey', controller: did,
    publicKeyMultibase: multibase};
  return {
    '@context': [didContext.CONTEXT_URL, multikeyContext.CONTEXT_URL],
    id: did, verificationMethod: [vm], assertionMethod: [vm.id],
    authentication: [vm.id], capabilityDelegation: [vm.id], capabilityInvocation: [vm.id],
  };
}

async function documentLoader(url) {
  if(CONTEXTS.has(url)) {
    return {contextUrl: null, documentUrl: url, document: CONTEXTS.get(url)};
  }
  if(url.startsWith('did:key:')) {
    const [did, fragment] = url.split('#');
    const doc = didDocument(did);
    const document = fragment === undefined ? doc : {
      '@context': multikeyContext.CONTEXT_URL,
      ...doc.verificationMethod.find(vm => vm.id === url)};
    if(fragment !== undefined && !document.id) {
      throw new Error(`no verification method ${url}`);
    }
    return {contextUrl: null, documentUrl: url, document};
  }
  throw new Error(`refusing to load ${url}: nothing is fetched`);
}

function purposeOf(name) {
  if(name === 'assertionMethod') {
    return new AssertionProofPurpose();
  }
  if(name === 'capabilityDelegation') {
    return new ControllerProofPurpose({term: 'capabilityDelegation'});
  }
  throw new Error(`unknown purpose ${name}`);
}

async function verifyOne({document, purpose}) {
  const suite = document?.proof?.cryptosuite;
  if(!SUITES[suite]) {
    return {verified: false, error: `unknown cryptosuite ${suite}`};
  }
  const result = await jsigs.verify(structuredClone(document), {
    suite: new DataIntegrityProof({cryptosuite: SUITES[suite].createVerifyCryptosuite()}),
    purpose: purposeOf(purpose), documentLoader,
  });
  const error = result.error ? String(result.error.errors?.[0]?.message ??
    result.error.message ?? result.error) : null;
  return {verified: result.verified === true, error};
}

function highS(signature) {
  const s = BigInt('0x' + Buffer.from(signature.slice(32)).toString('hex'));
  return s > P256_N / 2n;
}

function lowSSigner(signer) {
  return {
    ...signer, id: signer.id, algorithm: signer.algorithm,
    async sign({data}) {
      const signature = new Uint8Array(await signer.sign({data}));
      if(!highS(signature)) {
        return signature;
      }
      const s = BigInt('0x' + Buffer.from(signature.slice(32)).toString('hex'));
      const low = (P256_N - s).toString(16).padStart(64, '0');
      return new Uint8Array([...signature.slice(0, 32), ...Buffer.from(low, 'hex')]);
    }
  };
}

async function keyPairOf(suite) {
  const pair = suite === 'eddsa-jcs-2022' ? await Ed25519Multikey.generate() :
    await EcdsaMultikey.generate({curve: 'P-256'});
  const did = `did:key:${pair.publicKeyMultibase}`;
  pair.id = `${did}#${pair.publicKeyMultibase}`;
  pair.controller = did;
  return pair;
}

async function signOne({suite, document, lowS, wantHighS}) {
  const pair = await keyPairOf(suite);
  for(let attempt = 0; attempt < 64; attempt++) {
    let signer = pair.signer();
    if(lowS && suite === 'ecdsa-jcs-2019') {
      signer = lowSSigner(signer);
    }
    let raw = null;
    const recorder = {...signer, id: signer.id, algorithm: signer.algorithm,
      async sign({data}) {
        raw = new Uint8Array(await signer.sign({data}));
        return raw;
      }};
    const signed = await jsigs.sign(structuredClone(document), {
      suite: new DataIntegrityProof({signer: recorder,
        cryptosuite: SUITES[suite].createSignCryptosuite()}),
      purpose: new AssertionProofPurpose(), documentLoader,
    });
    if(!wantHighS || highS(raw)) {
      return {document: signed, publicKeyMultibase: pair.publicKeyMultibase,
        verificationMethod: pair.id, highS: suite === 'ecdsa-jcs-2019' && highS(raw)};
    }
  }
  throw new Error('no high-S signature in 64 attempts');
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = {verify: [], sign: [], failures: []};
  for(const item of job.verify ?? []) {
    const got = await verifyOne(item);
    out.verify.push({label: item.label, ...got});
    if(got.verified !== item.expect) {
      out.failures.push(`${item.label}: expected verified=${item.expect}, got ` +
        `${got.verified} (${got.error})`);
    }
  }
  for(const item of job.sign ?? []) {
    out.sign.push({label: item.label, ...await signOne(item)});
  }
  process.stdout.write(JSON.stringify(out));
  for(const failure of out.failures) {
    process.stderr.write(`interop: ${failure}\n`);
  }
  process.exitCode = out.failures.length ? 1 : 0;
}

main().catch(error => {
  process.stderr.write(`interop: broken job: ${error.stack ?? error}\n`);
  process.exitCode = 2;
});
