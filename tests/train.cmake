# End-to-end training tests: exact resume, crash safety, bad inputs, learning (scripts driving the programs).
mamba2_script_test(test_train_resume train/test_resume.sh)
mamba2_script_test(test_train_crash train/test_crash.sh)
mamba2_script_test(test_train_bad_inputs train/test_bad_inputs.sh)
mamba2_script_test(test_train_learning train/test_learning.sh)
