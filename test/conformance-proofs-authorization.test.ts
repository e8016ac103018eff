/** Issue 42.5: each defect of the faulty sample client of the authorization group fails exactly the scenarios that meet it (helpers/conformance-proofs.ts). */
import { describe } from 'vitest';
import { proveDefects } from './helpers/conformance-proofs.js';

describe('42.5 the faulty sample client', () => proveDefects('authorization'));
