# ivector stage rules
