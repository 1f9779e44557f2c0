# Evaluation: metrics, ridge baseline, predictions file, mamba2_eval (issue 4 item 3).
mamba2_unit_test(test_metrics SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/eval/test_metrics.c)
mamba2_unit_test(test_ridge SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/eval/test_ridge.c)
mamba2_unit_test(test_predictions SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/eval/test_predictions.c)
mamba2_unit_test(test_eval SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/eval/test_eval.c)
# mamba2_eval end to end: a fixture program writes a small dataset and checkpoint (no trainer needed).
add_executable(eval_fixture ${CMAKE_CURRENT_SOURCE_DIR}/eval/eval_fixture.c)
target_link_libraries(eval_fixture PRIVATE mamba2)
mamba2_script_test(test_eval_cli eval/test_eval_cli.sh $<TARGET_FILE:eval_fixture>)
