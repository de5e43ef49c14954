# data stage rules
