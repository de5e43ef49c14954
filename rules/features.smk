# features stage rules
