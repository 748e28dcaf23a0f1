// cline: see scenarios.mjs for what is run and asserted, hosts.mjs for the host's set-up and
// its model's mock.
import { cline } from "./hosts.mjs";
import { defineHostTests } from "./scenarios.mjs";

defineHostTests(cline);
