# final stage rules
